"""``examples/openai_audio.py`` runs unmodified against a running gateway (the default config's
``sim-whisper`` and ``sim-tts``)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_audio.py"


async def test_example_runs(gateway_server: Any, make_config: Any) -> None:
    sim_url = make_config().upstreams[0].base_url
    gw = await gateway_server(make_config(
        extra_models=[{"id": "sim-whisper", "price": {"per_minute": 0.006}},
                      {"id": "sim-tts", "price": {"per_mchar": 15}}],
        extra_upstreams=[{"name": "sim-audio", "protocol": "chat", "base_url": sim_url, "api_key": "sk-sim",
                          "models": ["sim-whisper", "sim-tts"]}]))
    user = await gw.create_user("u", quota_usd=1)
    key = (await gw.create_key(user["id"], name="k"))["key"]
    env = {**os.environ, "GATEWAY_URL": gw.base_url, "GATEWAY_KEY": key,
           "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLE), env=env, stdout=pipe,
                                                stderr=pipe)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert text.count("[simulated]") >= 2, text
    assert "verbose_json: 2.0 seconds, 1 segment(s)" in text and "00:00:00,000 --> " in text
    assert "speech: " in text and " s\n" in text
