"""Issue 34 point 1, CONTRACT 6b: upstream timeouts as documented, through HTTP with the openai SDK
against upstreams that take the request and never answer. ``first_byte_s: 1`` bounds an attempt's
wait to about a second after the request is written (not ``connect_s + first_byte_s``), and a
client that goes away stops the failover: no further upstream is asked (counted upstream)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
import pytest_asyncio
from aiohttp import web

from tests import loopback

MODEL = {"id": "hang-chat", "owned_by": "test", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}


class Hanging:
    """Reads each request whole, counts it, then says nothing until the test ends."""

    def __init__(self) -> None:
        self.received: list[float] = []
        self.released = asyncio.Event()

    async def chat(self, request: web.Request) -> web.Response:
        await request.read()
        self.received.append(time.monotonic())
        await self.released.wait()
        return web.json_response({"error": {"message": "too late"}}, status=500)


@pytest_asyncio.fixture
async def hanging() -> AsyncIterator[tuple[str, Hanging]]:
    upstream = Hanging()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", upstream.chat)
    async with loopback.serving(app, access_log=None, shutdown_timeout=0.5) as base:
        try:
            yield base, upstream
        finally:
            upstream.released.set()


def _upstreams(base: str, count: int) -> list[dict[str, Any]]:
    timeouts = {"connect_s": 10, "first_byte_s": 1, "idle_s": 30, "total_s": 60}
    return [{"name": f"hang-{n}", "protocol": "chat", "base_url": base, "api_key": "sk-x", "priority": n,
             "models": ["hang-chat"], "timeouts": timeouts} for n in range(count)]


async def _key(gateway_server: Any, make_config: Any, upstreams: list[dict[str, Any]]) -> tuple[Any, str]:
    config = make_config(extra_models=[MODEL], extra_upstreams=upstreams,
                         routing={"max_attempts": len(upstreams), "cooldown_s": 30})
    handle = await gateway_server(config)
    user = await handle.create_user(quota_usd=10)
    return handle, (await handle.create_key(user["id"]))["key"]


@pytest.mark.parametrize("stream", [False, True])
async def test_first_byte_s_bounds_each_attempt_from_the_request_written(
        gateway_server: Any, make_config: Any, hanging: tuple[str, Hanging], stream: bool) -> None:
    base, upstream = hanging
    handle, key = await _key(gateway_server, make_config, _upstreams(base, 2))
    client = openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0)
    began = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="hang-chat", stream=stream,
                                             messages=[{"role": "user", "content": "hi"}])
    elapsed = time.monotonic() - began
    assert caught.value.status_code == 502
    assert len(upstream.received) == 2
    # Two attempts of about 1 s each (connect_s, 10, no longer counts once the request is written).
    assert 2.0 <= elapsed < 4.0, elapsed
    assert 0.95 <= upstream.received[1] - upstream.received[0] < 1.8


async def test_a_client_that_goes_away_stops_the_failover(gateway_server: Any, make_config: Any,
                                                          hanging: tuple[str, Hanging]) -> None:
    base, upstream = hanging
    handle, key = await _key(gateway_server, make_config, _upstreams(base, 3))
    client = openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0, timeout=0.4)
    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(model="hang-chat", messages=[{"role": "user", "content": "hi"}])
    await asyncio.sleep(3.5)  # three attempts would have been made by now
    assert len(upstream.received) == 1
    rows = (await handle.admin("GET", "/admin/logs?model=hang-chat")).json()["data"]
    assert [(r["outcome"], r["attempts"], r["charge_nano"]) for r in rows] == [("client_disconnect", 1, 0)]
