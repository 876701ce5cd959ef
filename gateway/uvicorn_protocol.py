"""The gateway's HTTP/1 protocol for uvicorn: uvicorn's httptools protocol with what it lacks
(``gateway.server_config.uvicorn_options`` puts it in place):

* **A deadline on each request head, and one timer for it and the keep-alive.** uvicorn has only
  a keep-alive timer, armed after a response; a head that never completes was held for ever. Here
  the connection waits for its client at most ``timeout_keep_alive`` seconds (which
  ``uvicorn_options`` sets to ``limits.header_timeout_s``): from the connection to the end of the
  first head, from a response's end to the next request's first byte, and from there to the end of
  its head; then it is closed at once. The wait's
  start is a number; one timer per connection checks it when it fires and is re-armed for what is
  left, instead of a timer made and cancelled twice per request (uvicorn's keep-alive, the head's).
* **A lingering close.** When uvicorn closes a connection whose request body is still arriving
  (an early 413 or 408 answered with ``Connection: close``), closing the socket with unread data
  makes the kernel send a reset, and a client still writing its body never reads the answer. As
  nginx and granian do, the answer is sent, the write side shut (FIN), and what the client still
  sends is read and dropped until it closes or ``LINGER_S`` have passed. A connection closed
  between requests (keep-alive timeout, shutdown) has nothing to drain and closes at once.
* **A response's head and body in one send.** uvicorn writes them separately, two system calls
  and two packets; the head waits for the body's write (at most until the end of that turn of the
  event loop, so a stream's head is not held back by its upstream); a body over ``JOIN_MAX``
  bytes is not copied to join it.
* **A note in the scope once the whole body is in** (``BODY_COMPLETE_SCOPE_KEY``), so that the
  body deadline (``gateway.deadlines``) arms no timer for a body that is already buffered.
* **An answer to a request the parser refuses** (a NUL or lone CR in a header, a header line
  without a colon): ``400`` in the default error envelope, ``invalid_request``, with a fresh
  ``X-Service-Request-Id`` that an access-log line also names, instead of uvicorn's plain text.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.errors import InvalidRequest
from gateway.families import render_default_error
from gateway.http import (
    ARRIVED_SCOPE_KEY,
    BODY_COMPLETE_SCOPE_KEY,
    JSON_MEDIA_TYPE,
    REQUEST_ID_HEADER,
    new_request_id,
)

access_log = logging.getLogger("gateway.access")

LINGER_S = 2.0  # the longest a closed connection's remaining input is read and dropped
JOIN_MAX = 64 * 1024  # a body up to this size is sent in one piece with its response's head
REFUSED = "The request could not be parsed as HTTP/1.1 (a malformed request line or header)."


def refused_request_id() -> str:
    """A fresh request id for a request the server's HTTP parser refused, and the access-log line
    that names it (so what the client saw can be found); uvicorn's and hypercorn's refusals."""
    rid = new_request_id()
    access_log.info(orjson.dumps({"request_id": rid, "status": 400,
                                  "error": "request refused by the HTTP parser"}).decode())
    return rid


class LingeringTransport:
    """A proxy of a connection's transport whose ``close`` lingers (see the module's docstring);
    everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 body_arriving: Callable[[], bool]) -> None:
        self._transport = transport
        self._loop = loop
        self._body_arriving = body_arriving
        self.lingering = False
        self._timer: asyncio.TimerHandle | None = None
        self._hold_next = False  # the next write is a response's head: held for its body
        self._held: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def expect_head(self) -> None:
        """A request's head was parsed: the next write is its response's head (or a ``100
        Continue``), which waits for the write after it, or at most for the end of this turn of the
        event loop. uvicorn writes a head and its body separately: one send does for both."""
        self._hold_next = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.lingering:
            return
        if self._hold_next:
            self._hold_next = False
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        if self._held is not None:
            if len(data) <= JOIN_MAX:
                data, self._held = self._held + data, None
            else:  # joining would copy a large body: two sends cost less
                self.flush()
        self._transport.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def pause_reading(self) -> None:
        if not self.lingering:  # what the client still sends must be read, to be dropped
            self._transport.pause_reading()

    def close(self) -> None:
        if self.lingering or self._transport.is_closing():
            return
        self.flush()
        if not self._body_arriving():
            self._transport.close()
            return
        self.lingering = True
        self._transport.resume_reading()
        if self._transport.can_write_eof():
            self._transport.write_eof()  # FIN once the answer is written
        self._timer = self._loop.call_later(LINGER_S, self.close_now)

    def close_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()
        if not self._transport.is_closing():
            self._transport.close()


class GatewayHttpTools(HttpToolsProtocol):
    _deadline_timer: asyncio.TimerHandle | None = None
    _waiting_since: float | None = None  # loop time the wait for the client began; None: serving
    _lingering: LingeringTransport | None = None
    _in_body = False  # a request head was parsed and its body has not all arrived

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._lingering = LingeringTransport(transport, self.loop,  # type: ignore[arg-type]
                                             lambda: self._in_body)
        super().connection_made(self._lingering)  # type: ignore[arg-type]
        self._wait_for_client()

    def data_received(self, data: bytes) -> None:
        if self._lingering is not None and self._lingering.lingering:
            return  # the rest of a body nobody will read
        super().data_received(data)

    def eof_received(self) -> None:
        if self._lingering is not None and self._lingering.lingering:
            self._lingering.close_now()
            return
        super().eof_received()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.cycle is not None:  # a later head's time starts at its first byte (the first's at
            self._wait_for_client()  # the connection)

    def on_headers_complete(self) -> None:
        self._waiting_since = None
        self._in_body = True
        self.scope[ARRIVED_SCOPE_KEY] = time.perf_counter()  # type: ignore[literal-required]
        if self._lingering is not None:
            self._lingering.expect_head()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_body = False
        self.scope[BODY_COMPLETE_SCOPE_KEY] = True  # type: ignore[literal-required]
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # uvicorn's, but the keep-alive wait is ``_wait_for_client`` rather than a timer each time.
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._wait_for_client()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        if self._lingering is not None:
            self._lingering.close_now()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        rid = refused_request_id()
        body = render_default_error(InvalidRequest(REFUSED))
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:  # date (and server, when on)
            head += [name, b": ", value, b"\r\n"]
        head.append(f"content-type: {JSON_MEDIA_TYPE}\r\ncontent-length: {len(body)}\r\n"
                    f"{REQUEST_ID_HEADER}: {rid}\r\nconnection: close\r\n\r\n".encode("latin-1"))
        self.transport.write(b"".join(head) + body)
        self.transport.close()

    # --- the wait for the client ---------------------------------------------------------------------
    def _wait_for_client(self) -> None:
        self._waiting_since = self.loop.time()
        if self._deadline_timer is None:
            self._deadline_timer = self.loop.call_later(self.timeout_keep_alive, self._deadline_reached)

    def _deadline_reached(self) -> None:
        self._deadline_timer = None
        since = self._waiting_since
        if since is None:
            return  # serving a request: the next wait arms the timer again
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head waits while the request before it is served: its time starts then.
            self._wait_for_client()
            return
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self._deadline_timer = self.loop.call_later(left, self._deadline_reached)
        elif self._lingering is not None:
            self._lingering.close_now()
