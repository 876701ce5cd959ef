"""SIGTERM while a stream is in flight: the stream still runs to its end, then the process exits 0
with the call settled and logged (the meter flushed before storage closed)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import yaml

from gateway.settings.config import load_config
from gateway.storage import open_storage
from tests.core.test_serve import Server, e2e_config

TOKENS = 60  # at 10 ms a token: a 0.6 s stream, well inside the 10 s graceful timeout


async def test_sigterm_lets_an_in_flight_stream_finish_and_flushes_its_charge(tmp_path: Path) -> None:
    config_path, port, _ = e2e_config(tmp_path)
    raw = yaml.safe_load(config_path.read_text())
    for upstream in raw["upstreams"]:
        upstream["api_key"] = "sk-sim-tok10"  # the simulator paces tokens at 10 ms
    config_path.write_text(yaml.safe_dump(raw))
    base_url = f"http://127.0.0.1:{port}"
    server = await Server.start(config_path)
    try:
        api_key = (await server.read_until("API key:")).split("API key:")[1].strip()
        await server.wait_healthy(base_url)
        body = {"model": "sim-chat", "stream": True,
                "messages": [{"role": "user", "content": f"count sim:tokens={TOKENS}"}]}
        async with aiohttp.ClientSession() as http, http.post(
                base_url + "/v1/chat/completions", json=body,
                headers={"Authorization": f"Bearer {api_key}"}) as resp:
            assert resp.status == 200
            first = await resp.content.readany()
            assert first
            server.proc.send_signal(15)  # SIGTERM with the stream half way
            rest = await resp.content.read()
        stream = first + rest
        assert stream.rstrip().endswith(b"data: [DONE]")
        assert stream.count(b'"delta"') >= TOKENS
        assert await asyncio.wait_for(server.proc.wait(), 30) == 0
    finally:
        server.kill()

    storage = open_storage(load_config(config_path).database)
    await storage.open()
    try:
        users = await storage.list_users()
        assert users[0].used_nano > 0 and users[0].request_count == 1
        page = await storage.log_page(users[0].id, 1, 10)
        assert [(log.outcome, log.completion_tokens) for log in page.items] == [("success", TOKENS)]
        assert await storage.audit() == []
    finally:
        await storage.close()
