"""One kept-alive HTTP/1.1 connection of the relay's client (``gateway.upstream.http1``) to an
upstream origin: an asyncio protocol that sends a request's bytes, feeds the answer's bytes through
httptools to the ``UpstreamAnswer`` it carries (one at a time), and tells the pool that owns it
when it is free again or lost."""

from __future__ import annotations

import asyncio
from typing import Protocol, cast

import httptools

from gateway.upstream.http1_answer import Disconnected, MalformedAnswer, UpstreamAnswer
from gateway.upstream.http1_request import Origin


class ConnectionPool(Protocol):
    """What a connection asks of the pool that owns it (``Http1Client``)."""

    def give_back(self, connection: Http1Connection) -> None: ...

    def free_slot(self, origin: Origin) -> None: ...

    def lost(self, connection: Http1Connection) -> None: ...


class Http1Connection(asyncio.Protocol):
    """One connection to an origin, carrying one answer at a time."""

    def __init__(self, pool: ConnectionPool, origin: Origin, loop: asyncio.AbstractEventLoop) -> None:
        self._pool = pool
        self.origin = origin
        self.loop = loop  # kept: each asyncio.get_running_loop() is a getpid() system call on 3.11
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self.answer: UpstreamAnswer | None = None
        self.open = True  # false from the moment it is aborted, before asyncio reports it lost
        self.reused = False
        self.idle_since = 0.0
        self._informational = False  # parsing a 1xx answer, which the real answer follows
        self.write_paused = False  # the transport's buffer is full: ``drain`` waits
        self._drained: asyncio.Future[None] | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one without subclassing it

    def data_received(self, data: bytes) -> None:
        answer = self.answer
        if answer is None or answer.over:  # bytes nobody asked for: the connection is not reused
            self.abort()
            return
        answer.heard = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            answer.fail(MalformedAnswer(f"the upstream's answer is not HTTP/1.1 ({exc})"))
            self.abort()

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        ended_by_peer = self.open and exc is None
        self.open = False
        self._pool.lost(self)
        answer = self.answer
        if answer is not None:
            answer.lost(ended_by_peer)
            if not answer.finished:  # its slot is free now, whatever becomes of the answer object
                answer.finished = True
                self._pool.free_slot(self.origin)
        self._wake_writer(Disconnected("the connection closed while the request was being sent"))

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self._wake_writer(None)

    # --- httptools callbacks (an answer that is over takes nothing more) ----------------------------

    def on_message_begin(self) -> None:
        answer = self.answer
        if answer is not None and answer.over:  # a second answer to one request: not HTTP we trust
            answer.keep_alive = False
            self.abort()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.answer is not None and not self.answer.over:
            self.answer.header(name, value)

    def on_headers_complete(self) -> None:
        answer = self.answer
        if answer is None or answer.over:
            return
        status = self._parser.get_status_code()
        if status < 200:  # 100 Continue, 103 Early Hints: forget its headers, the real answer follows
            self._informational = True
            answer.headers.clear()
            return
        answer.headers_complete(status, self._parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        if self.answer is not None and not self.answer.over:
            self.answer.body(body)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
        elif self.answer is not None and not self.answer.over:
            self.answer.complete()

    # --- used by the client and the answer -----------------------------------------------------------

    def send(self, data: bytes) -> None:
        if self.open and self.transport is not None:
            self.transport.write(data)

    async def drain(self) -> None:
        if self.write_paused and self.open:
            self._drained = self.loop.create_future()
            try:
                await self._drained
            finally:
                self._drained = None
        if not self.open:
            raise Disconnected("the connection closed while the request was being sent")

    def _wake_writer(self, error: BaseException | None) -> None:
        drained = self._drained
        if drained is not None and not drained.done():
            if error is None:
                drained.set_result(None)
            else:
                drained.set_exception(error)

    def pause_reading(self) -> None:
        if self.transport is not None and self.open:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and self.open:
            self.transport.resume_reading()

    def abort(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.abort()

    def finish(self, reusable: bool) -> None:
        """Its answer is released (``UpstreamAnswer.release``)."""
        self.answer = None
        if reusable and self.open:
            self._pool.give_back(self)
        else:
            self.abort()
            self._pool.free_slot(self.origin)
