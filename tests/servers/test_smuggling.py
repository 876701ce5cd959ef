"""A request with both ``Content-Length`` and ``Transfer-Encoding: chunked``, on each server: which
of them serves the request its body hides by Content-Length (request smuggling behind a proxy that
follows Content-Length while the server follows Transfer-Encoding).

Found (granian 2.8, uvicorn 0.54 with h11, hypercorn 0.18): all three follow Transfer-Encoding (as
RFC 9112, 6.1, allows). Granian then closes the connection after its answer (``Connection:
close``), as the RFC requires, so what follows is never read; uvicorn and hypercorn (h11) keep the
connection open and serve what follows as a second request. Neither offers an option against it
(``gateway.server.options``). Pinned here, so that an upgrade that changes it is noticed; the
gateway's own hostile-client tests (``tests/hostile/test_hostile_client.py``) hold granian to it.
"""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.server.servers import ServerLimits
from tests.hardening.conftest import raw_http
from tests.servers import embedded

SERVES_SMUGGLED = {"granian": False, "uvicorn": True, "hypercorn": True}
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
BODY = b"0\r\n\r\n" + SMUGGLED


@pytest.mark.parametrize("server", embedded.server_params())
async def test_content_length_beside_transfer_encoding(server: str) -> None:
    paths: list[str] = []

    async def record(request: Request) -> Response:
        paths.append(request.url.path)
        await request.body()
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/{path:path}", record, methods=["GET", "POST"])])
    base, stop = await embedded.serving(app, server, ServerLimits(header_timeout_s=1.0))
    try:
        paths.clear()  # the start-up probe's /healthz
        raw = await raw_http(base, b"POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                                   b"Transfer-Encoding: chunked\r\n\r\n%s" % (len(BODY), BODY))
    finally:
        await stop()
    assert ("/smuggled" in paths) == SERVES_SMUGGLED[server], (paths, raw[:400])
    if not SERVES_SMUGGLED[server]:  # one request, by Transfer-Encoding, and the connection closed
        assert paths == ["/first"] and raw.count(b"HTTP/1.1 ") == 1, raw[:400]
        assert b"\r\nconnection: close\r\n" in raw.lower(), raw[:400]
