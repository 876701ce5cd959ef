"""Defect 8: requests the server's HTTP parser refuses, on each server ``gateway serve`` runs.

Found (granian 2.8, uvicorn 0.54 with h11, hypercorn 0.18): a NUL or a lone CR in a header, a
header line without a colon, a space or a NUL in a header name and an empty header name are refused
by every server's own parser, before any ASGI app exists for the request, with ``400`` and
``Connection: close``; the app (and so any upstream) is never reached. None of the three offers a
public setting or hook to shape that answer (``gateway.server.options``), so it carries neither the
gateway's envelope nor a request id:

- granian answers from hyper, in Rust: ``400``, an empty body.
- uvicorn: ``400`` with the text ``Invalid HTTP request received.``.
- hypercorn: ``400``, an empty body.

This module pins each server's answer so that an upgrade that changes it is noticed. Requests that a
server lets through (a byte 0xFF, a DEL, a bare LF, an obs-fold line: which ones depends on the
server) reach the app, which answers them like any other request: its envelope and its request id,
never a 5xx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
import pytest_asyncio

from gateway.edge.app import create_app
from tests.conftest import MakeConfig
from tests.hardening.conftest import raw_http, split_response
from tests.servers import embedded

REFUSED = {  # by every server's parser
    "nul in value": b"X-A: a\x00b\r\n", "lone cr": b"X-A: a\rb\r\n", "no colon": b"Bad Header\r\n",
    "space in name": b"X A: b\r\n", "nul in name": b"X-A\x00: b\r\n", "empty name": b": b\r\n"}
SERVER_DEPENDENT = {  # refused by some parsers, passed to the app by others
    "ctl in value": b"X-A: a\x01b\r\n", "del in value": b"X-A: a\x7fb\r\n",
    "0xff in value": b"X-A: a\xffb\r\n", "obs-fold": b"X-A: a\r\n b\r\n", "bare lf": b"X-A: a\nX-B: b\r\n"}
REFUSAL_BODY = {"granian": b"", "uvicorn": b"Invalid HTTP request received.", "hypercorn": b""}
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@dataclass
class Recording:
    """The gateway app, noting the path of every HTTP request that reaches it."""

    app: Any
    paths: list[str] = field(default_factory=list)

    @property
    def state(self) -> Any:  # embedded.start reads the app's limits from it
        return self.app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


@dataclass
class Served:
    server: str
    base_url: str
    app: Recording


@pytest_asyncio.fixture(params=embedded.server_params())
async def served(request: pytest.FixtureRequest, make_config: MakeConfig) -> AsyncIterator[Served]:
    """The gateway on each server, configured as ``gateway serve`` configures it."""
    app = Recording(create_app(make_config(), load_entrypoints=False))
    base, stop = await embedded.serving(app, request.param)
    yield Served(request.param, base, app)
    await stop()


def _request(head: bytes) -> bytes:
    return b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + head + b"Connection: close\r\n\r\n"


@pytest.mark.parametrize("name", REFUSED)
async def test_parser_refusal(served: Served, name: str) -> None:
    """400, the connection closed (``raw_http`` reads until the server closes), the app never
    called, no request id (no server has a hook for one: see the module docstring)."""
    calls = len(served.app.paths)
    raw = await raw_http(served.base_url, _request(REFUSED[name]))
    status, headers, body = split_response(raw)
    assert (status, headers.get("connection"), body) == (400, "close", REFUSAL_BODY[served.server]), raw
    assert len(served.app.paths) == calls
    assert "x-service-request-id" not in headers, raw
    # The server goes on serving, and a normal answer has exactly one id (the app's).
    ok = await raw_http(served.base_url, HEALTHZ)
    assert ok.startswith(b"HTTP/1.1 200")
    assert ok.lower().count(b"x-service-request-id") == 1


@pytest.mark.parametrize("name", SERVER_DEPENDENT)
async def test_parser_refusal_or_app_answer(served: Served, name: str) -> None:
    """Either the server's refusal as above, or the app's own answer (401 here: no key) in its
    envelope with its request id; never a 5xx."""
    calls = len(served.app.paths)
    raw = await raw_http(served.base_url, _request(SERVER_DEPENDENT[name]))
    status, headers, body = split_response(raw)
    if len(served.app.paths) == calls:
        assert (status, body) == (400, REFUSAL_BODY[served.server]), raw
    else:
        assert status == 401, raw
        assert headers["x-service-request-id"].startswith("req_")
        assert orjson.loads(body)["error"]["code"] == "invalid_api_key"
