"""The README's first calls (``examples/*.py``) run unmodified against a running gateway."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script", ["openai_chat.py", "anthropic_messages.py", "genai_generate.py"])
async def test_example_runs(gw: Any, script: str) -> None:
    env = {**os.environ, "GATEWAY_URL": gw.base_url, "GATEWAY_KEY": gw.key,
           "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLES / script), env=env,
                                                stdout=pipe, stderr=pipe)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert text.count("[simulated]") >= 2 and "usage:" in text
