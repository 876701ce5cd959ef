"""Property 2: every deadline, each a test. The request-body deadlines (idle and total, 408) are in
``test_defects.py`` and the upstream first-byte deadline in ``tests/relay/test_routing.py``
(``test_first_byte_timeout_fails_over``) and ``test_upstream_faults.py`` (``hang``). Here: the
request-head deadline of each server that has one (``limits.header_timeout_s``: granian and
hypercorn; uvicorn closes only an idle keep-alive connection), the upstream connect deadline and the
upstream idle (silence mid-stream) deadline."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterator

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from gateway.edge.app import create_app
from gateway.server.servers import DEFAULT_SERVER
from tests import loopback
from tests.conftest import GatewayHandle, MakeConfig, StartGateway
from tests.hardening.conftest import raw_http, user_and_key
from tests.servers import embedded

PRICE = {"input_per_mtok": 1, "output_per_mtok": 1}
HEAD_S = 1.0  # limits.header_timeout_s in these tests
DEFAULT_HEAD_S = 5.0  # issue 16: "300 slow-header connections were cut at 5 s"
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "


async def cut_after(base_url: str, data: bytes, limit_s: float) -> tuple[float, bytes]:
    """Open a connection, send ``data`` and wait for the server to close it: the seconds that took
    and what it sent (TimeoutError when it is still open after ``limit_s``)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    started = time.monotonic()
    try:
        if data:
            writer.write(data)
            await writer.drain()
        received = b""
        async with asyncio.timeout(limit_s):
            with contextlib.suppress(ConnectionResetError):
                while chunk := await reader.read(65536):
                    received += chunk
        return time.monotonic() - started, received
    finally:
        writer.close()


@pytest.mark.parametrize("server", embedded.server_params(embedded.HEAD_DEADLINE_SERVERS))
async def test_request_header_deadline(server: str, make_config: MakeConfig) -> None:
    """A client that does not finish its request head within ``limits.header_timeout_s`` is cut off,
    on every server that has a head deadline, configured by the same functions as ``gateway
    serve``'s (the CLI itself: ``test_serve_limits.py``); the server goes on serving."""
    app = create_app(make_config(limits={"header_timeout_s": HEAD_S}), load_entrypoints=False)
    base, stop = await embedded.serving(app, server)
    try:
        slow = asyncio.gather(*(cut_after(base, SLOW_HEAD, 4 * HEAD_S) for _ in range(20)))
        healthz = asyncio.create_task(raw_http(base, HEALTHZ))
        for elapsed, received in await slow:
            assert 0.8 * HEAD_S < elapsed < 3 * HEAD_S, elapsed
            assert not received.startswith(b"HTTP/1.1 2"), received
        assert (await healthz).startswith(b"HTTP/1.1 200")  # not held up by the slow ones
    finally:
        await stop()


@pytest.mark.parametrize("server", embedded.server_params())
async def test_idle_keep_alive_deadline(server: str, make_config: MakeConfig) -> None:
    """On every server, an idle keep-alive connection is closed about ``header_timeout_s`` after
    its last response (uvicorn: rounded up to whole seconds)."""
    app = create_app(make_config(limits={"header_timeout_s": HEAD_S}), load_entrypoints=False)
    base, stop = await embedded.serving(app, server)
    keep_alive = HEALTHZ.replace(b"Connection: close", b"Connection: keep-alive")
    try:
        elapsed, received = await cut_after(base, keep_alive, 4 * HEAD_S)
        assert received.startswith(b"HTTP/1.1 200"), received
        assert 0.8 * HEAD_S < elapsed < 2.5 * HEAD_S, elapsed
    finally:
        await stop()


async def test_request_header_deadline_default(make_config: MakeConfig) -> None:
    """Without ``limits``, the deadline is 5 s on the default server (granian waits 30 s unless told)."""
    assert make_config().limits.header_timeout_s == DEFAULT_HEAD_S
    app = create_app(make_config(), load_entrypoints=False)
    base, stop = await embedded.serving(app, DEFAULT_SERVER)
    try:
        elapsed, _ = await cut_after(base, SLOW_HEAD, 2 * DEFAULT_HEAD_S)
        assert DEFAULT_HEAD_S - 0.5 < elapsed < DEFAULT_HEAD_S + 2, elapsed
    finally:
        await stop()


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A listening socket whose accept queue is full: a connect to it neither succeeds nor fails."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    yield port
    for filler in fillers:
        filler.close()
    server.close()


async def _stall(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "hello"}}]}
    await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
    await asyncio.sleep(3600)
    return response


@pytest_asyncio.fixture
async def stalling() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _stall)
    async with loopback.serving(app, handler_cancellation=True) as base:
        yield base


async def _gateway(gateway_server: StartGateway, make_config: MakeConfig, base_url: str) -> GatewayHandle:
    upstream = {"name": "slow", "protocol": "chat", "base_url": base_url, "api_key": "sk",
                "models": {"slow-chat": "m"},
                "timeouts": {"connect_s": 0.5, "first_byte_s": 5, "idle_s": 0.5}}
    return await user_and_key(await gateway_server(make_config(
        extra_models=[{"id": "slow-chat", "price": PRICE}], extra_upstreams=[upstream],
        routing={"max_attempts": 1})))


async def test_upstream_connect_deadline(gateway_server: StartGateway, make_config: MakeConfig,
                                         unanswered_port: int) -> None:
    gw = await _gateway(gateway_server, make_config, f"http://127.0.0.1:{unanswered_port}")
    started = time.monotonic()
    reply = await gw.request("POST", "/v1/chat/completions", key=gw.key,
                             json={"model": "slow-chat", "messages": [{"role": "user", "content": "hi"}]})
    elapsed = time.monotonic() - started
    assert reply.status in (502, 504), reply.text
    assert reply.json()["error"]["code"] == "upstream_error"
    assert elapsed < 3, elapsed


async def test_upstream_idle_deadline(gateway_server: StartGateway, make_config: MakeConfig,
                                      stalling: str) -> None:
    gw = await _gateway(gateway_server, make_config, stalling)
    started = time.monotonic()
    reply = await gw.request("POST", "/v1/chat/completions", key=gw.key, json={
        "model": "slow-chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    elapsed = time.monotonic() - started
    assert reply.status == 200
    assert b"hello" in reply.body and b"upstream_error" in reply.body  # the in-band error after silence
    assert 0.4 < elapsed < 3, elapsed
