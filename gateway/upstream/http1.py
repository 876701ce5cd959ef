"""The text relay's HTTP/1.1 client: kept-alive connections to each upstream origin, one request
at a time on each (``gateway.upstream.http1_connection``); requests' heads made by
``gateway.upstream.http1_request``, answers parsed by httptools (llhttp, the parser uvicorn serves
with) and read as ``UpstreamAnswer`` (``gateway.upstream.http1_answer``).

Why the relay has its own client: it sends one POST and reads one answer per call, and aiohttp's
general machinery around that (request and response objects, multidicts, auto headers, tracing,
a timer per read) cost about 75 us of CPU per call against about 20 us for this client, measured
with the same server; at the gateway's c=16 profile aiohttp's client was 30% of the samples. Media
tasks (redirects, downloads, SSRF-checked callbacks) keep aiohttp (``UpstreamPool.session``).

What it does: HTTP and HTTPS (the system's certificate authorities, hostnames checked); keep-alive
(an idle connection is dropped after ``KEEPALIVE_S``); at most ``MAX_PER_ORIGIN`` connections in
use per origin, later calls wait for one; a body as bytes, or as an async iterable of chunks (sent
chunked, or as it is when the caller set Content-Length, which is then checked); an answer that
comes before the whole body was sent (an early refusal) is read, not lost; a request on a kept-alive
connection the upstream had already closed, of which nothing came back, is sent once more on a new
one. Like the relay's aiohttp session before it, it follows no redirects and reads no proxy
settings from the environment; a ``user:password@`` in the URL becomes Basic authorization. Host
names are resolved through ``gateway.upstream.resolver`` (kept 10 s, each address tried in turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterable, Awaitable, Callable

from gateway.upstream.http1_answer import (
    ACCEPT_ENCODING,
    ConnectFailed,
    Disconnected,
    MalformedAnswer,
    UpstreamAnswer,
    UpstreamConnectionError,
)
from gateway.upstream.http1_connection import Http1Connection
from gateway.upstream.http1_request import Destination, Origin
from gateway.upstream.resolver import Resolver

__all__ = ["ACCEPT_ENCODING", "ConnectFailed", "Destination", "Disconnected", "Http1Client",
           "MalformedAnswer", "Origin", "UpstreamAnswer", "UpstreamConnectionError"]

KEEPALIVE_S = 60.0  # an idle connection older than this is closed instead of reused
MAX_PER_ORIGIN = 512  # connections in use at once to one scheme://host:port
_ONE_WRITE_BYTES = 64 * 1024  # a body up to this size goes in the same write as its head


def _left(deadline: float) -> float:
    """Seconds until ``deadline`` (``time.monotonic()``), never below zero."""
    return max(deadline - time.monotonic(), 0.0)


class _StaleConnection(Disconnected):
    """A kept-alive connection was gone when the request went out, and nothing came back."""


class Http1Client:
    """The pool of connections and the one entry point, ``post``."""

    def __init__(self, tls: ssl.SSLContext | None = None, resolver: Resolver | None = None) -> None:
        self._resolver = resolver or Resolver()
        self._idle: dict[Origin, list[Http1Connection]] = {}
        self._open: set[Http1Connection] = set()
        self._in_use: dict[Origin, int] = {}
        self._queued: dict[Origin, deque[asyncio.Future[None]]] = {}
        self._tls = tls  # made on first use: loading the system's CAs takes milliseconds

    async def post(self, origin: Origin, head: bytes, body: bytes | AsyncIterable[bytes], *,
                   connect_s: float, first_byte_s: float, idle_s: float,
                   on_sent: Callable[[], None] | None = None) -> UpstreamAnswer:
        """Send ``head`` (the request line and header lines, without the blank line that ends them;
        ``Destination``) and ``body`` to ``origin``; return once the answer's head has come. A body
        of chunks goes chunked unless ``head`` sets its Content-Length. Connecting takes at most
        ``connect_s``, and the head must come within ``connect_s + first_byte_s`` of the call (a
        wait for a free connection included), else ``TimeoutError``. ``on_sent`` is called once
        the request is sent, before the wait for the answer: work that can overlap the
        upstream's."""
        deadline = time.monotonic() + connect_s + first_byte_s
        try:
            return await self._post_once(origin, head, body, connect_s, idle_s, deadline, on_sent, reuse=True)
        except _StaleConnection:  # the upstream had closed it as the request went: nothing was done
            return await self._post_once(origin, head, body, connect_s, idle_s, deadline, on_sent,
                                         reuse=False)

    async def _post_once(self, origin: Origin, head: bytes, body: bytes | AsyncIterable[bytes],
                         connect_s: float, idle_s: float, deadline: float,
                         on_sent: Callable[[], None] | None, *, reuse: bool) -> UpstreamAnswer:
        await self._take_slot(origin, deadline)
        try:
            connection = (self._idle_connection(origin) if reuse else None) or await self._connect(
                origin, min(connect_s, _left(deadline)))
        except BaseException:
            self.free_slot(origin)
            raise
        answer = connection.answer = UpstreamAnswer(connection, connection.loop, idle_s)
        # A timer failing the head, not asyncio.timeout: that costs a task lookup, a Timeout and
        # three get_running_loop() calls per call (about 4% of the gateway's CPU at c=16).
        timer = connection.loop.call_later(_left(deadline), answer.time_out)
        try:
            if isinstance(body, bytes) and len(body) <= _ONE_WRITE_BYTES:
                connection.send(b"%bContent-Length: %d\r\n\r\n%b" % (head, len(body), body))
                if connection.write_paused:
                    await self._send_until_answered(answer, connection.drain())
            else:
                await self._send_until_answered(answer, self._send_body(connection, head, body))
            if on_sent is not None:
                on_sent()
            await answer.head
        except Disconnected as exc:
            answer.keep_alive = False
            answer.release()
            if connection.reused and not answer.heard and isinstance(body, bytes):
                raise _StaleConnection(str(exc)) from exc
            raise
        except BaseException:
            answer.keep_alive = False
            answer.release()  # closes the connection: its state is unknown
            raise
        finally:
            timer.cancel()
        return answer

    @staticmethod
    async def _send_until_answered(answer: UpstreamAnswer, sending: Awaitable[None]) -> None:
        """Send a body that takes more than one write while watching for the answer: an upstream
        may refuse (413, 401, ...) before it has read the whole body, and then stop reading it."""
        task = asyncio.ensure_future(sending)
        try:
            await asyncio.wait((task, answer.head), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if answer.head.done() and not answer.head.exception():
            if task.cancelled() or task.exception() is not None:
                answer.keep_alive = False  # the body was cut short: the connection's framing is lost
            return
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error

    @staticmethod
    async def _send_body(connection: Http1Connection, head: bytes,
                         body: bytes | AsyncIterable[bytes]) -> None:
        if isinstance(body, bytes):  # a large one: not copied into one buffer with its head
            connection.send(b"%bContent-Length: %d\r\n\r\n" % (head, len(body)))
            connection.send(body)
            await connection.drain()
            return
        declared = next((line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")),
                        None)
        connection.send(head + (b"Transfer-Encoding: chunked\r\n\r\n" if declared is None else b"\r\n"))
        sent = 0
        async for chunk in body:
            if chunk:
                sent += len(chunk)
                connection.send(b"%x\r\n%b\r\n" % (len(chunk), chunk) if declared is None else chunk)
                await connection.drain()
        if declared is None:
            connection.send(b"0\r\n\r\n")
        elif sent != int(declared.split(b":", 1)[1]):
            # More or fewer bytes than announced would shift every later answer on the connection.
            raise ValueError(f"the body was {sent} bytes, not the {declared.decode()} announced")

    def _idle_connection(self, origin: Origin) -> Http1Connection | None:
        idle = self._idle.get(origin)
        stale_before = time.monotonic() - KEEPALIVE_S
        while idle:
            connection = idle.pop()
            if connection.open and connection.idle_since > stale_before:
                connection.reused = True
                return connection
            self._forget(connection)
        return None

    async def _connect(self, origin: Origin, connect_s: float) -> Http1Connection:
        try:
            async with asyncio.timeout(connect_s):
                connection = await self._connect_first(origin)
        except OSError as exc:  # an unknown host, no address that answers, TLS (ssl.SSLError is one)
            self._resolver.forget(origin.host, origin.port)
            raise ConnectFailed(f"cannot connect to {origin.host}:{origin.port} ({exc})") from exc
        self._open.add(connection)
        return connection

    async def _connect_first(self, origin: Origin) -> Http1Connection:
        """A connection to the first of ``origin``'s addresses, in the resolver's order, that takes
        one; the last address's refusal is raised."""
        addresses = await self._resolver.addresses(origin.host, origin.port)
        for address in addresses[:-1]:
            try:
                return await self._connect_to(origin, address)
            except ssl.SSLError:
                raise  # the upstream answered: its certificate or TLS is wrong, not its address
            except OSError:
                continue  # refused, unreachable: the next address
        return await self._connect_to(origin, addresses[-1])

    async def _connect_to(self, origin: Origin, address: str) -> Http1Connection:
        tls = self._tls_context() if origin.tls else None
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            lambda: Http1Connection(self, origin, loop), address, origin.port, ssl=tls,
            server_hostname=origin.host if tls else None)
        return connection

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    # --- connection slots: at most MAX_PER_ORIGIN connections in use per origin -------------------

    async def _take_slot(self, origin: Origin, deadline: float) -> None:
        in_use = self._in_use.get(origin, 0)
        if in_use < MAX_PER_ORIGIN:
            self._in_use[origin] = in_use + 1
            return
        turn = asyncio.get_running_loop().create_future()
        self._queued.setdefault(origin, deque()).append(turn)
        try:
            async with asyncio.timeout(_left(deadline)):
                await turn  # the slot is handed over by ``free_slot``, the count unchanged
        except BaseException:
            if turn.done() and not turn.cancelled():
                self.free_slot(origin)  # handed over as this call gave up: pass it on
            raise

    def free_slot(self, origin: Origin) -> None:
        queued = self._queued.get(origin)
        while queued:
            turn = queued.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._in_use[origin] -= 1

    def give_back(self, connection: Http1Connection) -> None:
        now = time.monotonic()
        connection.idle_since = now
        idle = self._idle.setdefault(connection.origin, [])
        # Calls take the newest (``_idle_connection``): the oldest ages here, so look at it too.
        if idle and idle[0].idle_since < now - KEEPALIVE_S:
            self._forget(idle.pop(0))
        idle.append(connection)
        self.free_slot(connection.origin)

    def lost(self, connection: Http1Connection) -> None:
        """A connection ended: an idle one leaves the pool."""
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)

    def _forget(self, connection: Http1Connection) -> None:
        self._open.discard(connection)
        connection.abort()

    def close(self) -> None:
        """Close every connection (at shutdown)."""
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()
