"""The hypercorn configuration ``gateway serve`` runs with.

Requests the HTTP parser refuses (a NUL or a lone CR in a header, a malformed request line) are
answered by hypercorn itself, before any ASGI app exists for them: ``400``, ``Content-Length: 0``,
``Connection: close``. The app cannot add its request id there, and hypercorn offers no hook for
that answer, only for the extra headers it puts on every response it writes
(``Config.response_headers``). So the one thing achievable is done here: when those headers are
asked for by hypercorn's own error answer (and only then: the app's responses already carry their
id from ``RequestIdMiddleware``), they include a fresh ``X-Service-Request-Id``, and the access log
gets a line with that id and status, so that what the client saw can be found. The body stays
empty (hypercorn fixes its length at 0): no envelope can be sent without replacing hypercorn's
protocol class. ``tests/hardening/test_parser_refusal.py`` pins this behaviour to the installed
hypercorn, so an upgrade that moves the error path is noticed.

The other servers (``gateway.servers``) were probed with the same requests (NUL, lone CR, a line
without a colon): granian 2.8 answers ``400`` with an empty body, uvicorn 0.54 ``400`` with the
text ``Invalid HTTP request received.``; neither calls the app nor offers a hook for that answer,
so there no request id is possible at all.
"""

from __future__ import annotations

import logging
import sys

import orjson
from hypercorn.config import Config as HypercornConfig

from gateway.http import REQUEST_ID_HEADER, new_request_id

access_log = logging.getLogger("gateway.access")

_HEADER = REQUEST_ID_HEADER.lower().encode("latin-1")
_SERVER_ERROR_PATH = "_send_error_response"  # hypercorn's own 4xx answer (protocol/h11.py)


class GatewayHypercornConfig(HypercornConfig):
    def response_headers(self, protocol: str) -> list[tuple[bytes, bytes]]:
        headers = super().response_headers(protocol)
        if sys._getframe(1).f_code.co_name == _SERVER_ERROR_PATH:
            rid = new_request_id()
            headers.append((_HEADER, rid.encode("ascii")))
            line = {"request_id": rid, "error": "request refused by the HTTP parser"}
            access_log.info(orjson.dumps(line).decode())
        return headers
