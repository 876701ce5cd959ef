"""The one HTTP client of everything the gateway sends upstream (text relay, media tasks, result
downloads): one aiohttp session per event loop, configured through its public options only, with
the limits every answer is read under.

What an upstream's answer may make the gateway hold or wait for, each from the config:

* its head: ``limits.upstream_header_bytes`` per line, ``limits.upstream_header_count`` lines
  (aiohttp's parser refuses more, as a ``ClientResponseError``);
* a whole (non-streamed) body, after decompression: ``limits.upstream_body_bytes``
  (``UpstreamAnswer.read`` stops reading past it; aiohttp inflates a gzip body a bounded piece at a
  time, so a small body that inflates to gigabytes never sits in memory whole);
* the event loop: a read that finds data waiting returns without letting other calls run, and
  taking it lets aiohttp inflate the next piece at once, so a reader lets the loop turn after
  every ``LOOP_SHARE_BYTES`` it took (``LoopShare``): a gzip bomb read up to the body limit would
  otherwise hold every other call for as long as inflating that limit takes (about 190 ms at
  the default 64 MiB); and aiohttp inflates ``INFLATE_STEP`` at a time (its ``read_bufsize``);
* connecting (TCP and TLS): ``connect_s`` (aiohttp's ``sock_connect``);
* the answer's head: within ``first_byte_s`` of the request's last byte being written
  (``UpstreamClient.request``; until the request is written, a free connection, connecting and
  sending are bounded by ``connect_s + first_byte_s``);
* a pause between two reads: ``idle_s`` (``UpstreamAnswer``'s watchdog, one timer per answer);
* the whole attempt, connect to last byte: ``total_s`` (the same watchdog; the head's wait too).

Redirects are never followed here (a text upstream's 3xx is a failed attempt, decided by the
caller); media downloads follow them through the SSRF guard (``gateway.tasks.upstream``). Proxy
settings are not read from the environment. A ``user:password@`` in an upstream URL becomes Basic
authorization unless the upstream's own headers carry an ``Authorization``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from typing import TypedDict
from urllib.parse import unquote

import aiohttp
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDictProxy
from yarl import URL

from gateway.runtime.coarse_timers import CoarseTimer, Deadline, timers_of
from gateway.settings.config import LimitsConfig, UpstreamTimeouts

Body = bytes | AsyncIterable[bytes]

__all__ = ["AnswerTooLarge", "Destination", "LoopShare", "UpstreamAnswer", "UpstreamClient",
           "UpstreamConnectionError"]

KEEPALIVE_S = 60.0  # an idle pooled connection older than this is closed instead of reused
USER_AGENT = "model-gateway/0.1"
# aiohttp writes a bytes body in one piece (and warns past 1 MB: it may hold the event loop). A large
# one goes a piece at a time instead, with its length announced: not as a BytesIO, whose size
# aiohttp reads through getbuffer(), which copies the whole body out of the bytes it shared.
_LARGE_BODY = 1024 * 1024
_PIECE = 256 * 1024
LOOP_SHARE_BYTES = 64 * 1024  # read without a turn of the event loop: well under 1 ms of inflating
# aiohttp's read buffer, which is also how much it inflates of a compressed body at a time (and
# twice it, how much it holds before pausing the connection): at its default 64 KiB, six gzip bombs
# at once cost each event-loop turn about 6 ms; at 16 KiB, a quarter. Reading a 20 MB plain body
# costs the same CPU at either size (docs/performance.md).
INFLATE_STEP = 16 * 1024


class LoopShare:
    """Counts what a reader took since it last let the event loop turn: a read of data already
    buffered never suspends the task. ``took`` says when to turn it (``await asyncio.sleep(0)``),
    past ``LOOP_SHARE_BYTES``; a plain call, as it runs for every chunk of every stream."""

    __slots__ = ("_taken",)

    def __init__(self) -> None:
        self._taken = 0

    def took(self, nbytes: int) -> bool:
        self._taken += nbytes
        if self._taken < LOOP_SHARE_BYTES:
            return False
        self._taken = 0
        return True


def body_payload(body: Body | None, headers: dict[str, str],
                 on_written: Callable[[], None] | None = None) -> Body | aiohttp.Payload | None:
    """What aiohttp is given to send (``headers`` gets the Content-Length of a large body).
    ``on_written`` runs once the body's last byte has been handed to the connection: aiohttp calls
    a payload's ``write_with_length`` and asks an iterable for its next piece only after writing
    the one before, so both are public ways to learn when the request is written."""
    if isinstance(body, bytes) and len(body) > _LARGE_BODY:
        headers["Content-Length"] = str(len(body))
        return _pieces(body, on_written)
    if on_written is None or body is None:
        return body
    if isinstance(body, bytes):
        return _WrittenBytes(body, on_written)
    return _written_last(body, on_written)


class _WrittenBytes(aiohttp.BytesPayload):
    """A bytes body that says when aiohttp has written it (what aiohttp makes of bytes anyway)."""

    def __init__(self, body: bytes, on_written: Callable[[], None]) -> None:
        super().__init__(body)
        self._on_written = on_written

    async def write_with_length(self, writer: AbstractStreamWriter, content_length: int | None) -> None:
        await super().write_with_length(writer, content_length)
        self._on_written()


async def _pieces(body: bytes, on_written: Callable[[], None] | None = None) -> AsyncIterator[bytes]:
    view = memoryview(body)
    for start in range(0, len(view), _PIECE):
        yield bytes(view[start:start + _PIECE])
    if on_written is not None:
        on_written()


async def _written_last(body: AsyncIterable[bytes], on_written: Callable[[], None]) -> AsyncIterator[bytes]:
    async for piece in body:
        yield piece
    on_written()


class UpstreamConnectionError(Exception):
    """What came back from an upstream cannot be used (beyond aiohttp's own ``ClientError``s)."""


class AnswerTooLarge(UpstreamConnectionError):
    """A whole answer body grew past ``limits.upstream_body_bytes``."""


class Destination:
    """Where one kind of call goes: its URL (credentials taken out of it) and the headers every
    such call carries, made once per (upstream, path, model)."""

    __slots__ = ("headers", "url")

    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        parsed = URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"not an http(s) URL: {parsed.with_user(None)!s}")
        merged = dict(headers)
        if parsed.user is not None and not any(name.lower() == "authorization" for name in merged):
            credential = f"{unquote(parsed.raw_user or '')}:{unquote(parsed.raw_password or '')}"
            merged["Authorization"] = "Basic " + base64.b64encode(credential.encode()).decode()
        self.url = parsed.with_user(None)
        self.headers = merged

    def headers_with(self, extra: Mapping[str, str]) -> dict[str, str]:
        """The fixed headers with a call's own, which win over a fixed one of the same name."""
        if not extra:
            return dict(self.headers)
        replaced = {name.lower() for name in extra}
        out = {name: value for name, value in self.headers.items() if name.lower() not in replaced}
        out.update(extra)
        return out


class UpstreamAnswer:
    """One answer: status and headers, then its body read whole (``read``, within the body limit)
    or as it arrives (``readany``). ``release`` or ``close`` end it (an answer not read to its end
    drops its connection, which is what stops an upstream still generating).

    Its two deadlines, a read waiting past ``idle_s`` and the attempt running past its end
    (``total_s`` from the call), share one timer for the answer's life, checked when it fires:
    aiohttp's own total timeout would wrap every read of the body in a timer context (a task
    lookup per chunk of a stream)."""

    __slots__ = ("_body_limit", "_ends_at", "_expired", "_idle_s", "_loop", "_response", "_share", "_stopped",
                 "_timer", "_timers", "_waiting_since", "headers", "status")

    def __init__(self, response: aiohttp.ClientResponse, idle_s: float, body_limit: int,
                 ends_at: float) -> None:
        self._response = response
        self.status = response.status
        self.headers: CIMultiDictProxy[str] = response.headers
        self._idle_s = idle_s
        self._body_limit = body_limit
        self._loop = asyncio.get_running_loop()
        self._ends_at = ends_at  # loop time at which the attempt is over, read or not
        self._waiting_since: float | None = None
        self._expired = ""  # why the answer was cut: its deadline's words
        self._stopped = False  # ended by the gateway itself (``stop``): reads find the end, no error
        self._share = LoopShare()
        self._timers = timers_of(self._loop)
        self._timer: CoarseTimer | None = None
        self._arm(self._loop.time())

    def _arm(self, now: float) -> None:
        since = self._waiting_since
        next_idle = (now if since is None else since) + self._idle_s
        self._timer = self._timers.call_at(min(next_idle, self._ends_at), self._check)

    def _check(self) -> None:
        now = self._loop.time()
        since = self._waiting_since
        if now >= self._ends_at:
            self._expire("the attempt ran past its total time")
        elif since is not None and now - since >= self._idle_s:
            self._expire("the upstream went silent")
        else:
            self._arm(now)

    def _expire(self, why: str) -> None:
        self._expired = why
        self._timer = None
        self._response.close()  # a pending read ends; ``readany`` turns it into a timeout

    async def readany(self) -> bytes:
        """What has arrived since the last read (waiting up to the idle timeout); b"" at the end."""
        if self._expired:
            raise TimeoutError(self._expired)
        if self._stopped:
            return b""
        self._waiting_since = self._loop.time()
        try:
            data = await self._response.content.readany()
        except aiohttp.ClientError:
            if self._expired:
                raise TimeoutError(self._expired) from None
            if self._stopped:
                return b""
            raise
        finally:
            self._waiting_since = None
        if self._share.took(len(data)):
            await asyncio.sleep(0)
        return data

    async def read(self) -> bytes:
        """The whole body; ``AnswerTooLarge`` past the body limit (nothing more is read)."""
        parts: list[bytes] = []
        size = 0
        while data := await self.readany():
            size += len(data)
            if size > self._body_limit:
                self.close()
                raise AnswerTooLarge(f"the answer body is over {self._body_limit} bytes")
            parts.append(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def release(self) -> None:
        """Done with the answer: its connection serves the next call if it was read to its end."""
        self._stop_timer()
        self._response.release()

    def stop(self) -> None:
        """The gateway ends the answer early (a shutdown's grace is over): its connection is
        closed and a read, pending or later, finds the end instead of an upstream failure."""
        self._stopped = True
        self.close()

    def close(self) -> None:
        """Done with the answer, its connection closed whatever was left unread."""
        self._stop_timer()
        self._response.close()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class HeadLimits(TypedDict):
    max_line_size: int
    max_field_size: int
    max_headers: int


def head_limits(limits: LimitsConfig) -> HeadLimits:
    """aiohttp's bounds on an answer's head, from ``limits.upstream_header_*``: every session the
    gateway opens reads answers under them."""
    return HeadLimits(max_line_size=limits.upstream_header_bytes, max_field_size=limits.upstream_header_bytes,
                      max_headers=limits.upstream_header_count)


class UpstreamClient:
    """The pooled session and the one way a call is sent (``request``)."""

    def __init__(self, limits: LimitsConfig) -> None:
        # Read per call (a whole answer's bound); the head bounds and connections per host are the
        # session's, made once at start.
        self.limits = limits
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=self.limits.upstream_connections_per_host,
                                         keepalive_timeout=KEEPALIVE_S, ttl_dns_cache=10)
        limits = self.limits
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=None),
            # Only what an upstream needs: the gateway sends its own User-Agent with each call.
            skip_auto_headers=("User-Agent", "Accept"), trust_env=False, read_bufsize=INFLATE_STEP,
            **head_limits(limits))

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the upstream client is not started")
        return self._session

    def timeout(self, timeouts: UpstreamTimeouts) -> aiohttp.ClientTimeout:
        """aiohttp's timeout of one attempt: connecting only (the head's deadline is the caller's,
        the idle and total ones ``UpstreamAnswer``'s); made once per connect timeout."""
        found = self._timeouts.get(timeouts.connect_s)
        if found is None:
            found = self._timeouts[timeouts.connect_s] = aiohttp.ClientTimeout(
                total=None, sock_connect=timeouts.connect_s)
        return found

    async def request(self, method: str, destination: Destination, headers: dict[str, str],
                      body: Body | None, timeouts: UpstreamTimeouts,
                      on_sent: Callable[[], None] | None = None) -> UpstreamAnswer:
        """Send one request and return once the answer's head has come, within ``first_byte_s``
        of the request's last byte being written and within ``total_s`` (else ``TimeoutError``).
        Until the request is written (a free pooled connection, connecting within ``connect_s``,
        sending the body) the wait is bounded by ``connect_s + first_byte_s``. ``on_sent`` runs as
        the request leaves: work that can overlap the upstream's."""
        session = self.session
        if on_sent is not None:
            on_sent()
        loop = asyncio.get_running_loop()
        now = loop.time()
        ends_at = now + timeouts.total_s
        head_deadline = Deadline(min(now + timeouts.connect_s + timeouts.first_byte_s, ends_at))

        waiting = False  # for the head: an upstream may answer before the body is all sent

        def written() -> None:  # from here on, only the upstream's own time counts
            if waiting:
                head_deadline.reschedule(min(loop.time() + timeouts.first_byte_s, ends_at))

        payload = body_payload(body, headers, written)
        async with head_deadline:
            waiting = True
            try:
                response = await session.request(method, destination.url, data=payload,
                                                 headers=headers, allow_redirects=False,
                                                 timeout=self.timeout(timeouts))
            finally:
                waiting = False
        return UpstreamAnswer(response, timeouts.idle_s, self.limits.upstream_body_bytes, ends_at)
