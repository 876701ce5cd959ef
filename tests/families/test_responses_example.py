"""``examples/openai_responses.py`` runs unmodified against a running gateway."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_responses.py"


async def test_example_runs(gw: Any) -> None:
    env = {**os.environ, "GATEWAY_URL": gw.base_url, "GATEWAY_KEY": gw.key,
           "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLE), env=env, stdout=pipe,
                                                stderr=pipe)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert text.count("[simulated]") >= 4, text
    assert "tool said: sunny, 21C" in text and "items kept: 3" in text
