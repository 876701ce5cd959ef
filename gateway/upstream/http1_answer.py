"""One upstream answer as the relay's HTTP/1.1 client reads it (``gateway.upstream.http1``): fed by
its connection's parser, read whole or as it arrives, then given back. Also the client's errors.

Reading is paused while the reader is ``HIGH_WATER`` bytes behind (a stream's memory stays flat);
gzip and deflate bodies are decoded as they come; a body without a length ends with its
connection. Every failure of the connection or of the answer's framing is an
``UpstreamConnectionError``; a read that waits past the idle timeout raises ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Protocol, overload

HIGH_WATER = 256 * 1024  # bytes read ahead of the reader before the socket is paused
ACCEPT_ENCODING = "gzip, deflate"  # what requests ask for (as aiohttp did); without it any may come
DECODED = ("gzip", "x-gzip", "deflate")  # x-gzip: gzip's old name


class UpstreamConnectionError(Exception):
    """A connection to an upstream failed, or what came back on it is not a readable answer."""


class ConnectFailed(UpstreamConnectionError):
    """The connection could not be made (refused, unknown host, TLS handshake)."""


class Disconnected(UpstreamConnectionError):
    """The connection ended before the answer did."""


class MalformedAnswer(UpstreamConnectionError):
    """The upstream's bytes are not an HTTP/1.1 answer, or its body does not decode."""


class Carrier(Protocol):
    """What an answer asks of the connection that carries it."""

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def abort(self) -> None: ...
    def finish(self, reusable: bool) -> None: ...


class AnswerHeaders(dict[str, str]):
    """An answer's headers by lower-cased name (a repeated header's values joined by ", ");
    looked up in any case, as HTTP names are."""

    @overload  # type: ignore[override]
    def get(self, name: str, default: None = None) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        return super().get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class _Decoder:
    """A gzip or deflate body, decoded as it comes. Deflate is zlib-wrapped by the standard, but
    some servers send it raw: a first chunk that is not zlib is tried raw."""

    def __init__(self, encoding: str) -> None:
        self._may_be_raw = encoding == "deflate"
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS if encoding == "deflate" else 16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> bytes:
        try:
            out = self._zlib.decompress(data)
        except zlib.error:
            if not self._may_be_raw:
                raise
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._zlib.decompress(data)
        self._may_be_raw = False
        return out

    def finish(self) -> bytes:
        """The last bytes; a compressed stream cut before its end raises ``zlib.error``."""
        tail = self._zlib.flush()
        if not self._zlib.eof:
            raise zlib.error("the compressed body ended early")
        return tail


class UpstreamAnswer:
    """One answer: its status and headers once its head has come, then its body, read whole
    (``read``) or as it arrives (``readany``). ``release`` (after a whole read) or ``close`` give
    its connection back, for the next call when the answer was read to its end, else closed."""

    __slots__ = ("_buffered", "_carrier", "_chunks", "_decoder", "_done", "_error", "_idle_s", "_loop",
                 "_paused", "_until_close", "_waiter", "finished", "head", "headers", "heard", "keep_alive",
                 "status")

    def __init__(self, carrier: Carrier, loop: asyncio.AbstractEventLoop, idle_s: float) -> None:
        self.status = 0
        self.headers = AnswerHeaders()
        self.finished = False  # given back or closed
        self.heard = False  # a byte of it has arrived
        self.keep_alive = False  # the connection may carry the next call once this answer is read
        self._carrier = carrier
        self._loop = loop
        self._idle_s = idle_s
        self.head: asyncio.Future[None] = loop.create_future()  # done once status and headers came
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._done = False  # the whole body has arrived
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._until_close = False
        self._paused = False
        self._decoder: _Decoder | None = None

    # --- fed by the connection ---------------------------------------------------------------------

    def header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        had = dict.get(headers, key)
        dict.__setitem__(headers, key, text if had is None else f"{had}, {text}")

    def headers_complete(self, status: int, keep_alive: bool) -> None:
        self.status = status
        self.keep_alive = keep_alive
        headers = self.headers
        encoding = dict.get(headers, "content-encoding", "identity").strip().lower()
        if encoding in DECODED:
            self._decoder = _Decoder("deflate" if encoding == "deflate" else "gzip")
        elif encoding not in ("identity", ""):  # never asked for: its bytes would be relayed as they are
            self.fail(MalformedAnswer(f"the answer is in a content coding not asked for ({encoding})"))
            self._carrier.abort()
            return
        self._until_close = ("content-length" not in headers and status not in (204, 304)
                             and "chunked" not in dict.get(headers, "transfer-encoding", "").lower())
        if not self.head.done():
            self.head.set_result(None)

    def body(self, data: bytes) -> None:
        if self._decoder is not None:
            try:
                data = self._decoder.feed(data)
            except zlib.error as exc:
                self.fail(MalformedAnswer(f"the body does not decode ({exc})"))
                self._carrier.abort()
                return
        if data:  # a decoder may hold a few bytes back
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered > HIGH_WATER and not self._paused:
                self._paused = True
                self._carrier.pause_reading()
            self._wake()

    def complete(self) -> None:
        if self._decoder is not None:
            try:
                tail = self._decoder.finish()
            except zlib.error as exc:
                self.fail(MalformedAnswer(f"the body does not decode ({exc})"))
                return
            if tail:
                self._chunks.append(tail)
        self._done = True
        self._wake()

    @property
    def over(self) -> bool:
        """Its whole body has arrived, or it failed: nothing more belongs to it."""
        return self._done or self._error is not None

    def lost(self, ended_by_peer: bool) -> None:
        """Its connection ended: the end of a body delimited by the connection's end (when the
        upstream closed it), else a cut."""
        if self.over:
            return
        if ended_by_peer and self._until_close and self.status:
            self.keep_alive = False
            self.complete()
        else:
            self.fail(Disconnected("the upstream closed the connection before the answer ended"))

    def fail(self, error: BaseException) -> None:
        if not self.over:
            self._error = error
        if not self.head.done():
            self.head.set_exception(error)
            self.head.exception()  # retrieved: a call that stopped waiting leaves no warning
        self._wake()

    def time_out(self) -> None:
        """The head did not come in time (``Http1Client.post``'s deadline): the wait for it ends
        with ``TimeoutError``; the caller then closes the connection."""
        if not self.head.done():
            self.fail(TimeoutError())

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- read by the caller ------------------------------------------------------------------------

    async def readany(self) -> bytes:
        """What has arrived since the last read (waiting up to the idle timeout for something);
        b"" at the end of the body. A broken answer raises after the bytes read before the break."""
        while not self._chunks and not self.over:
            await self._wait()
        chunks = self._chunks
        if not chunks:
            if self._error is not None:
                raise self._error
            return b""
        self._chunks = []
        self._buffered = 0
        if self._paused:
            self._paused = False
            self._carrier.resume_reading()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def read(self) -> bytes:
        """The whole body."""
        parts = []
        while data := await self.readany():
            parts.append(data)
        return b"".join(parts)

    async def _wait(self) -> None:
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(self._idle_s, _expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def release(self) -> None:
        """Done with the answer: its connection serves the next call if the answer was read to
        its end, else it is closed."""
        if self.finished:
            return
        self.finished = True
        reusable = self._done and self._error is None and self.keep_alive and not self._chunks
        self._carrier.finish(reusable)

    def close(self) -> None:
        """The same as ``release``: an answer not read to its end closes its connection, which is
        what stops an upstream still generating."""
        self.release()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
