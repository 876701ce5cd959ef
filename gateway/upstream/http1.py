"""The text relay's HTTP/1.1 client: kept-alive connections to each upstream origin, one request
at a time on each, answers parsed by httptools (llhttp, the parser uvicorn serves with).

Why the relay has its own client: it sends one POST and reads one answer per call, and aiohttp's
general machinery around that (request and response objects, multidicts, auto headers, tracing,
a timer per read) cost about 75 us of CPU per call against about 20 us for this client, measured
with the same server; at the gateway's c=16 profile aiohttp's client was 30% of the samples. Media
tasks (redirects, downloads, SSRF-checked callbacks) keep aiohttp (``UpstreamPool.session``).

What it does: HTTP and HTTPS (the system's certificate authorities, hostnames checked); keep-alive
(an idle connection is dropped after ``KEEPALIVE_S``); at most ``MAX_PER_ORIGIN`` connections per
origin, later calls wait for one; a body as bytes, or as an async iterable of chunks (sent chunked,
or as it is when the caller set Content-Length); answers delimited by Content-Length, chunked, or
by the connection's end; gzip and deflate answers decoded; reading paused while the reader is
``HIGH_WATER`` bytes behind, so a stream's memory stays flat. Like the relay's aiohttp session
before it, it follows no redirects and reads no proxy settings from the environment.

Every failure of the connection or of the answer's framing raises an ``UpstreamConnectionError``
(``gateway.upstream.attempt.upstream_io`` maps them to upstream failures); the idle timeout of a
read raises ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterable, Mapping
from typing import NamedTuple, cast, overload
from urllib.parse import quote, urlsplit

import httptools

KEEPALIVE_S = 60.0  # an idle connection older than this is closed instead of reused
MAX_PER_ORIGIN = 512  # connections open at once to one scheme://host:port
HIGH_WATER = 256 * 1024  # bytes read ahead of the reader before the socket is paused
_ONE_WRITE_BYTES = 64 * 1024  # a body up to this size goes in the same write as its head
_URL_SAFE = ":/?#[]@!$&'()*+,;=%-._~"
_FORBIDDEN_IN_HEADERS = ("\r", "\n", "\0")


class UpstreamConnectionError(Exception):
    """A connection to an upstream failed, or what came back on it is not a readable answer."""


class ConnectFailed(UpstreamConnectionError):
    """The connection could not be made (refused, unknown host, TLS handshake)."""


class Disconnected(UpstreamConnectionError):
    """The connection ended before the answer did."""


class MalformedAnswer(UpstreamConnectionError):
    """The upstream's bytes are not an HTTP/1.1 answer, or its body does not decode."""


class Origin(NamedTuple):
    host: str
    port: int
    tls: bool


class Destination:
    """Where one kind of call goes: its origin and its request's head (the request line, Host and
    the headers every such call carries), encoded once."""

    __slots__ = ("_request_line", "head", "headers", "origin")

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        tls = parts.scheme == "https"
        port = parts.port or (443 if tls else 80)
        self.origin = Origin(parts.hostname, port, tls)
        # Reserved characters and existing escapes kept; spaces and non-ASCII escaped (as yarl does).
        target = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe=_URL_SAFE)
        host = parts.netloc.rpartition("@")[2]
        self._request_line = f"POST {target} HTTP/1.1\r\nHost: {host}\r\n".encode()
        self.headers = dict(headers)
        self.head = self._request_line + encode_headers(headers)

    def head_with(self, headers: Mapping[str, str]) -> bytes:
        """The head with a call's own ``headers``, which win over the fixed ones of the same name."""
        if not headers:
            return self.head
        lowered = {name.lower() for name in headers}
        fixed = {name: value for name, value in self.headers.items() if name.lower() not in lowered}
        return self._request_line + encode_headers({**fixed, **headers})


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """Header lines, each ending in CRLF; a name or value that would end its line early (CR, LF,
    NUL: header injection) is refused."""
    lines = []
    for name, value in headers.items():
        for part in (name, value):
            if any(c in part for c in _FORBIDDEN_IN_HEADERS):
                raise ValueError(f"header {name!r} holds a line break or NUL")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode()


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
    """A gzip or deflate body, decoded as it comes (deflate: zlib-wrapped, or raw as some send it)."""

    def __init__(self, encoding: str) -> None:
        self._raw_deflate_tried = encoding != "deflate"
        self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> bytes:
        try:
            return self._zlib.decompress(data)
        except zlib.error:
            if self._raw_deflate_tried:
                raise
            self._raw_deflate_tried = True
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            return self._zlib.decompress(data)

    def flush(self) -> bytes:
        return self._zlib.flush()


class UpstreamAnswer:
    """One answer: its status and headers once its head has come, then its body, read whole
    (``read``) or as it arrives (``readany``). ``release`` (after a whole read) or ``close`` give
    its connection back, for the next call when the answer was read to its end, else closed."""

    __slots__ = ("_buffered", "_chunks", "_connection", "_decoder", "_done", "_error", "_head",
                 "_idle_s", "_keep_alive", "_loop", "_paused", "_until_close", "_waiter", "finished",
                 "headers", "status")

    def __init__(self, connection: _Connection, loop: asyncio.AbstractEventLoop, idle_s: float) -> None:
        self.status = 0
        self.headers = AnswerHeaders()
        self.finished = False  # given back or closed
        self._connection = connection
        self._loop = loop
        self._idle_s = idle_s
        self._head: asyncio.Future[None] = loop.create_future()
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._done = False  # the whole body has arrived
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._keep_alive = False
        self._until_close = False
        self._paused = False
        self._decoder: _Decoder | None = None

    # --- fed by the connection ---------------------------------------------------------------------

    def _header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        had = dict.get(headers, key)
        dict.__setitem__(headers, key, text if had is None else f"{had}, {text}")

    def _headers_complete(self, status: int, keep_alive: bool) -> None:
        self.status = status
        self._keep_alive = keep_alive
        headers = self.headers
        encoding = dict.get(headers, "content-encoding", "").strip().lower()
        if encoding in ("gzip", "deflate", "x-gzip"):
            self._decoder = _Decoder("gzip" if encoding == "x-gzip" else encoding)
        self._until_close = ("content-length" not in headers and status not in (204, 304)
                             and "chunked" not in dict.get(headers, "transfer-encoding", "").lower())
        if not self._head.done():
            self._head.set_result(None)

    def _body(self, data: bytes) -> None:
        if self._decoder is not None:
            try:
                data = self._decoder.feed(data)
            except zlib.error as exc:
                self._fail(MalformedAnswer(f"the body does not decode ({exc})"))
                self._connection.abort()
                return
        if data:  # a decoder may hold a few bytes back
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered > HIGH_WATER and not self._paused:
                self._paused = True
                self._connection.pause_reading()
            self._wake()

    def _complete(self) -> None:
        if self._decoder is not None:
            tail = self._decoder.flush()
            if tail:
                self._chunks.append(tail)
        self._done = True
        self._wake()

    def _lost(self, exc: Exception | None) -> None:
        if self._done:
            return
        if exc is None and self._until_close and self.status:
            self._keep_alive = False
            self._complete()
        else:
            self._fail(Disconnected("the upstream closed the connection before the answer ended"))

    def _fail(self, error: BaseException) -> None:
        if self._error is None and not self._done:
            self._error = error
        if not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved: a call that stopped waiting leaves no warning
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- read by the caller ------------------------------------------------------------------------

    async def wait_head(self) -> None:
        await self._head

    async def readany(self) -> bytes:
        """What has arrived since the last read (waiting up to the idle timeout for something);
        b"" at the end of the body. A broken answer raises after the bytes read before the break."""
        while not self._chunks and not self._done and self._error is None:
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
            self._connection.resume_reading()
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
        reusable = self._done and self._error is None and self._keep_alive and not self._chunks
        self._connection.finish(reusable)

    def close(self) -> None:
        """The same as ``release``: an answer not read to its end closes its connection, which is
        what stops an upstream still generating."""
        self.release()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Connection(asyncio.Protocol):
    """One connection to an origin, carrying one answer at a time."""

    def __init__(self, client: Http1Client, origin: Origin) -> None:
        self._client = client
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self.answer: UpstreamAnswer | None = None
        self.open = True
        self.idle_since = 0.0
        self._skip_informational = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None

    # --- asyncio.Protocol ----------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one without subclassing it

    def data_received(self, data: bytes) -> None:
        if self.answer is None:  # nothing was asked: an upstream talking out of turn is not reused
            self.abort()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.answer._fail(MalformedAnswer(f"the upstream's answer is not HTTP/1.1 ({exc})"))
            self.abort()

    def eof_received(self) -> bool:
        return False  # the transport closes itself; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._client._lost(self)
        if self.answer is not None:
            self.answer._lost(exc)
        self._wake_writer(Disconnected("the connection closed while the request was being sent"))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writer(None)

    # --- httptools callbacks -----------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.answer is not None and not self._skip_informational:
            self.answer._header(name, value)

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # 100 Continue and the like: the real answer follows
            self._skip_informational = True
            return
        if self.answer is not None:
            self.answer._headers_complete(status, self._parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        if self.answer is not None:
            self.answer._body(body)

    def on_message_complete(self) -> None:
        if self._skip_informational:
            self._skip_informational = False
        elif self.answer is not None:
            self.answer._complete()

    # --- used by the client and the answer -----------------------------------------------------------

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def drain(self) -> None:
        if self._write_paused and self.open:
            self._drained = asyncio.get_running_loop().create_future()
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
        if self.transport is not None:
            self.transport.abort()

    def finish(self, reusable: bool) -> None:
        self.answer = None
        if reusable and self.open:
            self._client._give_back(self)
        else:
            self.abort()
            self._client._free_slot(self.origin)


class Http1Client:
    """The pool of connections and the one entry point, ``post``."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._idle: dict[Origin, list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._in_use: dict[Origin, int] = {}
        self._queued: dict[Origin, deque[asyncio.Future[None]]] = {}
        self._tls = tls  # made on first use: loading the system's CAs takes milliseconds

    async def post(self, origin: Origin, head: bytes, body: bytes | AsyncIterable[bytes], *,
                   connect_s: float, idle_s: float) -> UpstreamAnswer:
        """Send ``head`` (the request line and header lines, without the blank line that ends them;
        ``Destination``) and ``body`` to ``origin``; return once the answer's head has come. A body
        of chunks goes chunked unless ``head`` sets its Content-Length."""
        await self._take_slot(origin)
        try:
            connection = self._idle_connection(origin) or await self._connect(origin, connect_s)
        except BaseException:
            self._free_slot(origin)
            raise
        loop = asyncio.get_running_loop()
        answer = connection.answer = UpstreamAnswer(connection, loop, idle_s)
        try:
            if isinstance(body, bytes):
                framed = b"%bContent-Length: %d\r\n\r\n" % (head, len(body))
                if len(body) <= _ONE_WRITE_BYTES:
                    connection.send(framed + body)
                else:  # not copied into one buffer
                    connection.send(framed)
                    connection.send(body)
            else:
                await self._send_chunks(connection, head, body)
            await connection.drain()
            await answer.wait_head()
        except BaseException:
            answer._keep_alive = False
            answer.release()  # closes the connection: its state is unknown
            raise
        return answer

    @staticmethod
    async def _send_chunks(connection: _Connection, head: bytes, body: AsyncIterable[bytes]) -> None:
        chunked = b"\ncontent-length:" not in b"\n" + head.lower()
        connection.send(head + (b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"\r\n"))
        async for chunk in body:
            if chunk:
                connection.send(b"%x\r\n%b\r\n" % (len(chunk), chunk) if chunked else chunk)
                await connection.drain()
        if chunked:
            connection.send(b"0\r\n\r\n")

    def _idle_connection(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        stale_before = time.monotonic() - KEEPALIVE_S
        while idle:
            connection = idle.pop()
            if connection.open and connection.idle_since > stale_before:
                return connection
            self._forget(connection)
        return None

    async def _connect(self, origin: Origin, connect_s: float) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if origin.tls else None
        try:
            async with asyncio.timeout(connect_s):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self, origin), origin.host, origin.port, ssl=tls,
                    server_hostname=origin.host if tls else None)
        except OSError as exc:  # refused, unreachable, unknown host, TLS (ssl.SSLError is one)
            raise ConnectFailed(f"cannot connect to {origin.host}:{origin.port} ({exc})") from exc
        self._open.add(connection)
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    # --- connection slots: at most MAX_PER_ORIGIN connections in use per origin -------------------

    async def _take_slot(self, origin: Origin) -> None:
        in_use = self._in_use.get(origin, 0)
        if in_use < MAX_PER_ORIGIN:
            self._in_use[origin] = in_use + 1
            return
        turn = asyncio.get_running_loop().create_future()
        self._queued.setdefault(origin, deque()).append(turn)
        try:
            await turn  # the slot is handed over by ``_free_slot``, the count unchanged
        except BaseException:
            if turn.done() and not turn.cancelled():
                self._free_slot(origin)  # handed over as this call gave up: pass it on
            raise

    def _free_slot(self, origin: Origin) -> None:
        queued = self._queued.get(origin)
        while queued:
            turn = queued.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._in_use[origin] -= 1

    def _give_back(self, connection: _Connection) -> None:
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.origin, []).append(connection)
        self._free_slot(connection.origin)

    def _lost(self, connection: _Connection) -> None:
        """A connection ended: an idle one leaves the pool (one in use is finished by its answer)."""
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)

    def _forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        connection.abort()

    def close(self) -> None:
        """Close every connection (at shutdown)."""
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()
