"""How ``gateway serve`` configures each ASGI server (``gateway.servers``); the suite's embedded
servers (``tests/servers/embedded.py``) are built with the same functions.

**The request-head deadline** (``limits.header_timeout_s``, 5 s by default): a connection that
has not sent a complete request head within it is closed, on every server, so that slow-header
clients cannot hold connections open:

- granian: hyper's HTTP/1 ``header_read_timeout``, from the connection (or the end of the previous
  response) to the end of a head. Granian is served in its HTTP/1 mode (``GRANIAN_HTTP``): in its
  ``auto`` mode (HTTP/1 and h2c on one port) granian 2.8 waits without any deadline for the bytes
  that tell the two apart, so a connection that sent nothing was held for ever. HTTP/2 without
  TLS (h2c) is hypercorn's.
- uvicorn: its httptools protocol has only a keep-alive timer, armed after a response; a head that
  never completes is held for ever. ``GatewayHttpTools`` (``gateway.uvicorn_protocol``) adds the
  missing timer, from the connection (or a request's first byte) to the end of its head, of
  ``timeout_keep_alive`` seconds, which is set to the deadline (uvicorn takes whole seconds:
  rounded up).
- hypercorn: its ``keep_alive_timeout`` runs while a connection has no request in progress, which
  includes a head still arriving: set to the deadline.

**Requests the HTTP parser refuses** (a NUL or a lone CR in a header, a line without a colon, a
space in a header name, a malformed request line) are answered by each server itself, before any
ASGI app exists for them; none calls the app or offers a hook to shape that answer, so only where
the protocol code is the gateway's own (uvicorn's) does it get the envelope and request id of
every other error:

- granian 2.8: ``400``, ``Content-Length: 0``, ``Connection: close`` (from hyper, in Rust).
- uvicorn 0.54: its own answer is ``400`` with the text ``Invalid HTTP request received.``; the
  gateway's protocol for it (``gateway.uvicorn_protocol``) answers ``400`` in the default error
  envelope (``invalid_request``) with a fresh ``X-Service-Request-Id`` and an access-log line.
- hypercorn 0.18: ``400``, ``Content-Length: 0``, ``Connection: close``. Hypercorn asks its config
  for the extra headers of every response it writes (``Config.response_headers``), its own error
  answer included: ``GatewayHypercornConfig`` adds a fresh ``X-Service-Request-Id`` there (only
  there: the app's responses already carry their id from ``EdgeMiddleware``) and writes an
  access-log line with that id, so that what the client saw can be found.

On granian and hypercorn no envelope can be sent without replacing the server's protocol code.
``tests/hardening/test_parser_refusal.py`` pins each server's answer to the installed version, so
an upgrade that changes it is noticed.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from granian.constants import HTTPModes
from granian.http import HTTP1Settings
from hypercorn.config import Config as HypercornConfig

from gateway.http import REQUEST_ID_HEADER
from gateway.uvicorn_protocol import GatewayHttpTools, refused_request_id

_HEADER = REQUEST_ID_HEADER.lower().encode("latin-1")
_SERVER_ERROR_PATH = "_send_error_response"  # hypercorn's own 4xx answer (protocol/h11.py)


GRANIAN_HTTP = HTTPModes.http1


def granian_http1(header_timeout_s: float) -> HTTP1Settings:
    return HTTP1Settings(header_read_timeout=max(1, round(header_timeout_s * 1000)))


def uvicorn_options(header_timeout_s: float) -> dict[str, Any]:
    """The ``uvicorn.Config`` options of the gateway's protocol (``gateway.uvicorn_protocol``)."""
    return {"http": GatewayHttpTools, "timeout_keep_alive": max(1, math.ceil(header_timeout_s))}


def hypercorn_config(header_timeout_s: float) -> GatewayHypercornConfig:
    hyper = GatewayHypercornConfig()
    hyper.keep_alive_timeout = header_timeout_s
    return hyper


class GatewayHypercornConfig(HypercornConfig):
    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        headers = super().response_headers(protocol)
        if sys._getframe(1).f_code.co_name == _SERVER_ERROR_PATH:
            headers.append((_HEADER, refused_request_id().encode("ascii")))
        return headers
