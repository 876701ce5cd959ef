"""Defect 8: requests hypercorn's HTTP parser refuses are answered by the server before the app is
called. With ``gateway serve``'s hypercorn config (``gateway.server_config``) that answer carries
an ``X-Service-Request-Id`` that the access log also names; the body stays empty (see the module's
docstring for why no envelope is possible)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import orjson
import pytest
import pytest_asyncio

from gateway.app import create_app
from gateway.server_config import GatewayHypercornConfig
from tests.conftest import MakeConfig
from tests.hardening.conftest import raw_http, split_response

BAD_HEADS = [b"X-A: a\x00b\r\n", b"X-A: a\rb\r\n", b"Bad Header\r\n", b"X A: b\r\n"]


@pytest_asyncio.fixture
async def served(make_config: MakeConfig) -> AsyncIterator[str]:
    """The app served by hypercorn with the config ``gateway serve`` uses."""
    from hypercorn.asyncio.run import worker_serve
    from hypercorn.utils import wrap_app

    app = create_app(make_config(), load_entrypoints=False)
    hyper = GatewayHypercornConfig()
    hyper.bind = ["127.0.0.1:0"]
    hyper.accesslog = None
    hyper.errorlog = logging.getLogger("hypercorn.error")
    sockets = hyper.create_sockets()
    port = sockets.insecure_sockets[0].getsockname()[1]
    stop = asyncio.Event()
    task = asyncio.create_task(worker_serve(wrap_app(app, hyper.wsgi_max_body_size, "asgi"), hyper,
                                            sockets=sockets, shutdown_trigger=stop.wait))
    base = f"http://127.0.0.1:{port}"
    for _ in range(500):
        try:
            raw = await raw_http(base, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if raw.startswith(b"HTTP/1.1 200"):
                break
        except OSError:
            pass
        await asyncio.sleep(0.01)
    yield base
    stop.set()
    await task


@pytest.mark.parametrize("bad", BAD_HEADS)
async def test_parser_refusal_carries_request_id(served: str, bad: bytes,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    raw = await raw_http(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + bad + b"\r\n")
    status, headers, body = split_response(raw)
    assert status == 400 and body == b""
    rid = headers.get("x-service-request-id", "")
    assert rid.startswith("req_"), raw
    logged = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"]
    assert any(line.get("request_id") == rid for line in logged)
    # A normal answer has exactly one id (the app's), and the server goes on serving.
    ok = await raw_http(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert ok.startswith(b"HTTP/1.1 200")
    assert ok.lower().count(b"x-service-request-id") == 1
