"""How ``gateway serve`` configures each ASGI server (``gateway.server.servers``), through each server's
public options only; the suite's embedded servers (``tests/servers/embedded.py``) are built with
the same functions, from the ``ServerLimits`` the config asks for (``gateway.server.servers``):

**The request-head deadline** (``limits.header_timeout_s``, 5 s by default), so that slow-header
clients cannot hold connections open:

- granian: hyper's HTTP/1 ``header_read_timeout``, from the connection (or the end of the previous
  response) to the end of a head. Granian is served in its HTTP/1 mode (``GRANIAN_HTTP``): in its
  ``auto`` mode (HTTP/1 and h2c on one port) granian 2.8 waits without any deadline for the bytes
  that tell the two apart, so a connection that sent nothing was held for ever.
- uvicorn: none. Its only timer is the keep-alive one, armed after a response (set to the deadline
  here, rounded up to whole seconds as uvicorn takes them); a first head that never completes is
  held for ever.
- hypercorn: its ``keep_alive_timeout`` runs while a connection has no request in progress, which
  includes a head still arriving: set to the deadline.

**The request-head size** (``limits.request_head_bytes``, 64 KiB by default), so that one client
cannot make the server buffer an endless head:

- granian: ``HTTP1Settings.max_buffer_size``, the most hyper buffers while a head is incomplete
  (a body is read through it a piece at a time, so large bodies are not bounded by it): over it,
  ``431 Request Header Fields Too Large``. Hyper also answers 431 to a head of more than 100
  header lines. Hyper refuses a buffer under 8 KiB: the setting is raised to that.
- uvicorn: only with its pure-Python ``h11`` parser (``h11_max_incomplete_event_size``; its
  faster ``httptools`` parser buffers a head without any bound), so it is served with ``h11``:
  over it, ``400`` (uvicorn answers every parser error so).
- hypercorn: ``h11_max_incomplete_size``: over it, ``431``.

  h11 checks the size only of a head it has not all received: a head that arrives whole in one
  socket read (up to 256 KiB with asyncio) is parsed whatever its size; a larger or slower one is
  refused once the buffered part passes the limit.

**A request with both Content-Length and Transfer-Encoding** (request smuggling, behind a proxy
that reads the body by Content-Length): every server reads it by Transfer-Encoding; granian then
closes the connection after its answer, as RFC 9112 (6.1) requires, while uvicorn and hypercorn
(h11) keep it open and serve what follows as the next request, with no option against it
(``tests/servers/test_smuggling.py``).

**Requests the HTTP parser refuses** (a NUL or a lone CR in a header, a line without a colon, a
space in a header name, a malformed request line) are answered by each server itself, before any
ASGI app exists for them, with ``400`` and ``Connection: close``: granian and hypercorn with an
empty body, uvicorn with the text ``Invalid HTTP request received.``. None offers a public hook to
shape that answer, so it carries neither the gateway's envelope nor a request id;
``tests/hardening/test_parser_refusal.py`` pins each server's answer to the installed version, so
that an upgrade that changes it is noticed.

uvicorn and hypercorn are optional (``pip install 'model-gateway[uvicorn]'``, ``[hypercorn]``):
they are imported only by the functions that configure them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from granian.constants import HTTPModes
from granian.http import HTTP1Settings

from gateway.settings.config import LimitsConfig

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig

@dataclass(frozen=True)
class ServerLimits:
    """What the config asks of the server about request heads (each server takes them in its own
    options, below)."""

    # A connection that has not sent a complete request head by then is closed.
    header_timeout_s: float = 5.0  # limits.header_timeout_s
    head_bytes: int = 64 * 1024  # limits.request_head_bytes: a larger head is refused

    @classmethod
    def of(cls, limits: LimitsConfig) -> ServerLimits:
        return cls(limits.header_timeout_s, limits.request_head_bytes)


GRANIAN_HTTP = HTTPModes.http1
GRANIAN_MIN_BUFFER = 8192  # hyper panics on a smaller max_buffer_size


def granian_http1(limits: ServerLimits) -> HTTP1Settings:
    return HTTP1Settings(header_read_timeout=max(1, round(limits.header_timeout_s * 1000)),
                         max_buffer_size=max(GRANIAN_MIN_BUFFER, limits.head_bytes))


def uvicorn_options(limits: ServerLimits) -> dict[str, Any]:
    """The ``uvicorn.Config`` options for ``limits`` (what uvicorn can enforce of them)."""
    return {"http": "h11", "h11_max_incomplete_event_size": limits.head_bytes,
            "timeout_keep_alive": max(1, math.ceil(limits.header_timeout_s))}


def hypercorn_config(limits: ServerLimits) -> HypercornConfig:
    from hypercorn.config import Config as HypercornConfig

    hyper = HypercornConfig()
    hyper.keep_alive_timeout = limits.header_timeout_s
    hyper.h11_max_incomplete_size = limits.head_bytes
    return hyper
