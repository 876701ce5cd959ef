"""The one upstream-attempt path: build a call for a target, send it, read it, fail over.

Every relay (whole answers, streams, embeddings) goes through ``attempt``: for each target in
routing order (wrapping around, up to ``routing.max_attempts`` tries) it builds the upstream call,
``send``s it and reads the answer with the caller's ``Reader`` (the whole body, or a stream's first
chunk). Only an ``UpstreamFailure`` (nothing reached the client yet: connect error, timeout before
the first byte, 401/429/5xx, a read that broke) moves on to the next target and cools the failed
one down; an upstream's other 4xx is relayed (``relay_error``) in the client's envelope.

The HTTP client's errors are turned into gateway errors here and nowhere else: ``upstream_io`` maps
``aiohttp.ClientError``, the client's own ``UpstreamConnectionError`` (an answer over a limit,
``gateway.upstream.client``), a stream frame over its limit (``FrameTooLarge``, from a family's
stream parser: ``gateway.wire.frames``) and ``TimeoutError`` to ``UpstreamFailure`` (``raise ...
from exc``), both before the first byte and in the middle of a relayed stream (where the relay ends
the stream as cut instead of failing over). An answer that is not final (1xx) or a redirect (3xx)
is a failed attempt: a text upstream is called at its configured URL only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

import aiohttp
import msgspec

from gateway.accounts.records import FailedAttempt
from gateway.relay.canonical import EmbeddingRequest
from gateway.relay.client_watch import ClientWatch
from gateway.relay.translation import EmbeddingFrontend, UpstreamCall, takes_fast_path
from gateway.runtime.errors import GatewayError, UpstreamError, UpstreamHTTPError
from gateway.runtime.observe import current_request_id
from gateway.runtime.secrets_scrub import scrub_secrets
from gateway.upstream.client import UpstreamAnswer, UpstreamConnectionError
from gateway.wire.frames import FrameTooLarge

if TYPE_CHECKING:
    from gateway.relay.call import CallContext, ClientCall
    from gateway.upstream.pool import Target, UpstreamPool

T = TypeVar("T")
log = logging.getLogger("gateway.upstream")

REQUEST_ID_HEADER = "X-Service-Request-Id"
_REASON_MAX = 200  # characters of a client error's own text kept in a failure's reason
# Statuses after which an upstream is not asked again within the same call: it refused the
# gateway's own credential or permission (401, 403: an operator's problem, never relayed, since
# vendors echo parts of the key), or asked for a pause (429, whose Retry-After is its cool-down).
_NOT_AGAIN_THIS_CALL = frozenset({401, 403, 429})
RETRY_AFTER_MAX_S = 3600.0  # a longer Retry-After is taken as this
BACKOFF_FIRST_S = 0.25  # the wait before asking an upstream that already failed this call again
BACKOFF_MAX_S = 2.0

Reader = Callable[["Target", UpstreamAnswer], Awaitable[T]]


class UpstreamFailure(Exception):
    """A failed attempt that may be retried on another upstream (never reaches the client).

    Made only where an upstream has just failed (connect error, timeout, 401/429/5xx, a stream cut
    off, whether in the text relay, a stream's relay or a task call), so making one is also where
    the operator's warning line is written: the upstream's name, what happened, and the request
    (from the request's scope, ``gateway.runtime.observe``; "-" for background work such as task polls)."""

    def __init__(self, upstream: str, reason: str, status: int | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(f"{upstream}: {reason}")
        self.upstream = upstream
        self.reason = reason
        self.status = status
        self.retry_after_s = retry_after_s  # a 429's Retry-After: how long the upstream asked for
        log.warning("upstream %s failed: %s (request %s)", upstream, reason, current_request_id() or "-")


class ContextTooLong(UpstreamHTTPError):
    """An upstream refused the input as too long for the model's context: relayed like any 4xx,
    unless a fallback model serves the call (``gateway.relay.fallback``)."""


class upstream_io:  # lower case: used like a function, ``with upstream_io(name, "..."):``
    """The one place the HTTP clients' errors become gateway errors: inside the block, a client
    error or a timeout of upstream ``name`` raises ``UpstreamFailure`` (chained). A class, not a generator
    context manager, because the stream relay enters it around its whole read loop and it should
    cost nothing per chunk either way."""

    __slots__ = ("_doing", "_name")

    def __init__(self, name: str, doing: str) -> None:
        self._name = name
        self._doing = doing  # what was going on, for the failure's reason: "connecting", ...

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if isinstance(exc, TimeoutError):
            raise UpstreamFailure(self._name, f"timed out {self._doing}") from exc
        if isinstance(exc, (UpstreamConnectionError, aiohttp.ClientError)):
            raise UpstreamFailure(self._name, f"failed {self._doing} ({_describe(exc)})") from exc
        if isinstance(exc, FrameTooLarge):
            raise UpstreamFailure(self._name, f"sent {exc} ({self._doing})") from exc
        return False


def _describe(exc: BaseException) -> str:
    """A client error in a line, without the URL some of aiohttp's messages carry (a base URL may
    hold a credential in its query)."""
    if isinstance(exc, aiohttp.ClientResponseError):
        text = exc.message
    elif isinstance(exc, (aiohttp.ClientConnectorError, UpstreamConnectionError)):
        text = str(exc)
    else:
        text = ""
    text = " ".join(text.split())[:_REASON_MAX]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def open_response(pool: UpstreamPool, target: Target, call: UpstreamCall, request_id: str,
                        on_sent: Callable[[], None] | None = None) -> UpstreamAnswer:
    """Send one request and wait for the response headers (first byte), within the upstream's
    connect and first-byte timeouts; later reads are bounded by its idle timeout. Retryable
    failures raise UpstreamFailure: connection errors, timeouts, an answer over a limit, a 1xx or
    3xx answer, 5xx, and 401, 403, 429 (``_NOT_AGAIN_THIS_CALL``). A 2xx or other 4xx response is
    returned open (the caller releases it). ``on_sent``: called as the request
    leaves (``UpstreamClient.request``)."""
    upstream = target.upstream
    destination = pool.destination(upstream, call.path, target.upstream_model)
    headers = destination.headers_with(call.headers)
    headers[REQUEST_ID_HEADER] = request_id
    with upstream_io(upstream.name, "before the first byte"):
        response = await pool.http.request("POST", destination, headers, call.body, upstream.timeouts,
                                           on_sent=on_sent)
    status = response.status
    if status < 200 or 300 <= status < 400:
        response.close()  # not an answer to this call: never followed, never read
        raise UpstreamFailure(upstream.name, f"answered HTTP {status}, not a final answer", status)
    if status in _NOT_AGAIN_THIS_CALL or status >= 500:
        retry_after = retry_after_s(response.headers.get("Retry-After")) if status == 429 else None
        try:
            with upstream_io(upstream.name, "reading an error answer"):
                await response.read()
        except UpstreamFailure:
            pass  # it failed anyway; the status says why
        finally:
            response.release()
        raise UpstreamFailure(upstream.name, f"answered HTTP {status}", status, retry_after)
    return response


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header's wait in seconds (a number of seconds or an HTTP date), at most
    ``RETRY_AFTER_MAX_S``; None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


async def relay_error(pool: UpstreamPool, target: Target, response: UpstreamAnswer) -> GatewayError:
    """An upstream's non-retryable 4xx, as an error in the client's envelope."""
    try:
        with upstream_io(target.name, "reading an error answer"):
            body = await response.read()
    finally:
        response.release()
    adapter = pool.adapter(target.protocol)
    message = scrub_secrets(adapter.error_message(body))  # vendors echo keys
    # An adapter may recognise its protocol's "input too long for the context" refusal (optional:
    # ``context_too_long(status, body)``), after which the model's fallbacks are tried.
    too_long = getattr(adapter, "context_too_long", None)
    kind = ContextTooLong if too_long is not None and too_long(response.status, body) else UpstreamHTTPError
    return kind(response.status, message or f"The upstream answered HTTP {response.status}.")


async def read_body(target: Target, response: UpstreamAnswer) -> bytes:
    """A ``Reader``: the whole answer body (the connection goes back to the pool)."""
    try:
        with upstream_io(target.name, "reading the body"):
            return await response.read()
    finally:
        response.release()


async def read_first_chunk(target: Target, response: UpstreamAnswer) -> bytes:
    """A ``Reader`` for streams: the first chunk, proof that the stream started. The response stays
    open for the relay; on failure it is closed (dropping the connection)."""
    try:
        with upstream_io(target.name, "before the first chunk"):
            first = await response.readany()
    except BaseException:
        response.close()
        raise
    if not first:
        response.close()
        raise UpstreamFailure(target.name, "stream closed before the first chunk")
    return first


async def start_stream(target: Target,
                       response: UpstreamAnswer) -> tuple[UpstreamAnswer, bytes]:
    """The ``Reader`` of a streamed answer: the open response and its first chunk."""
    return response, await read_first_chunk(target, response)


async def send(ctx: CallContext, target: Target, call: UpstreamCall, read: Reader[T]) -> T:
    """One attempt on one target: open, relay a 4xx as the client's error, read."""
    pool = ctx.gateway.upstreams
    response = await open_response(pool, target, call, ctx.request_id, ctx.upstream_asked)
    if response.status >= 400:
        raise await relay_error(pool, target, response)
    result = await read(target, response)
    ctx.mark_first_byte()
    try:
        await ctx.hold_named()  # committed while the upstream answered: nothing waits, mostly
    except BaseException:
        response.close()
        raise
    return result


class Failover:
    """The failover policy of one call across its candidates (the text relay's ``attempt`` and the
    task engine's submissions): an upstream that answered 401, 403 or 429 is not asked again within
    the call (a 429 cools it down for its Retry-After, the others for ``routing.cooldown_s``); one
    that failed otherwise (connect error, timeout, 5xx, a broken answer) may be asked again once the
    others had their turn, after a backoff that doubles from ``BACKOFF_FIRST_S``."""

    __slots__ = ("_barred", "_failed", "_pool", "_position")

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool
        self._failed: dict[str, int] = {}  # upstream -> its failures within this call
        self._barred: set[str] = set()  # upstreams not to ask again within this call
        self._position = 0

    def next(self, names: Sequence[str]) -> int | None:
        """The index of the next candidate to ask (in order, wrapping around), None if none may."""
        for offset in range(len(names)):
            index = (self._position + offset) % len(names)
            if names[index] not in self._barred:
                self._position = index + 1
                return index
        return None

    async def back_off(self, name: str) -> None:
        """Before asking ``name`` again: a pause growing with its failures within this call."""
        if times := self._failed.get(name, 0):
            await asyncio.sleep(min(BACKOFF_FIRST_S * 2 ** (times - 1), BACKOFF_MAX_S))

    def failed(self, name: str, failure: UpstreamFailure) -> None:
        self._pool.mark_failure(name, cool_s=failure.retry_after_s)
        self._failed[name] = self._failed.get(name, 0) + 1
        if failure.status in _NOT_AGAIN_THIS_CALL:
            self._barred.add(name)


async def attempt(ctx: CallContext, targets: list[Target], build: Callable[[Target], UpstreamCall],
                  read: Reader[T]) -> tuple[Target, T]:
    """Try the targets in order for up to ``routing.max_attempts`` tries, as ``Failover`` allows;
    only UpstreamFailure moves on. Returns the target that answered and what ``read`` made of its
    answer."""
    pool = ctx.gateway.upstreams
    failover = Failover(pool)
    names = [t.name for t in targets]
    observed = ctx.gateway.observes_calls
    last: UpstreamFailure | None = None
    watch: ClientWatch | None = None  # once an attempt failed: is the client still there?
    try:
        for _ in range(max(ctx.config.routing.max_attempts, 1)):
            index = failover.next(names)
            if index is None:
                break
            target = targets[index]
            if last is not None and ctx.receive is not None:
                watch = watch or ClientWatch(ctx.receive)
                await watch.before_attempt(failover.back_off(target.name))  # ClientGone: no more
            else:
                await failover.back_off(target.name)
            ctx.attempts += 1
            ctx.upstream = target.name
            started = time.monotonic()
            try:
                if observed:
                    sending = send(ctx, target, *_observed(ctx, target, build(target), read))
                else:
                    sending = send(ctx, target, build(target), read)
                result = await (sending if watch is None else watch.run(sending))
            except UpstreamFailure as failure:
                if observed:
                    ended = ctx.gateway.plugins.hook.gateway_attempt_ended
                    ended(ctx=ctx, target=target, status=failure.status, error=failure.reason)
                failover.failed(target.name, failure)
                last = failure
                took_ms = int((time.monotonic() - started) * 1000)
                failed = FailedAttempt(upstream=target.name, status=failure.status,
                                       error=failure.reason[:500], ms=took_ms)
                ctx.failed_attempts = [*(ctx.failed_attempts or ()), failed]
                continue
            except GatewayError as err:  # a relayed 4xx, the client gone: the call ends with it
                if observed:
                    status = err.status if isinstance(err, UpstreamHTTPError) else None
                    ctx.gateway.plugins.hook.gateway_attempt_ended(ctx=ctx, target=target, status=status,
                                                                   error=err.code)
                raise
            pool.mark_success(target.name, latency_ms=(time.monotonic() - started) * 1000)
            return target, result
    finally:
        if watch is not None:
            await watch.close()
    reason = last.reason if last else "no upstream available"
    raise UpstreamError(f"The upstream failed after {ctx.attempts} attempt(s): {reason}.")


def _observed(ctx: CallContext, target: Target, call: UpstreamCall,
              read: Reader[T]) -> tuple[UpstreamCall, Reader[T]]:
    """An attempt that a plugin follows (``Gateway.observes_calls``): announced with the headers it
    adds (``gateway_attempt_started``), its answer reported once read (``gateway_attempt_ended``)."""
    hook = ctx.gateway.plugins.hook
    headers = dict(call.headers)
    hook.gateway_attempt_started(ctx=ctx, target=target, number=ctx.attempts, headers=headers)

    async def reading(target: Target, response: UpstreamAnswer) -> T:
        result = await read(target, response)
        hook.gateway_attempt_ended(ctx=ctx, target=target, status=response.status, error=None)
        return result

    # A copy: a built call is kept for the next attempt (``ClientCall.translated``).
    return msgspec.structs.replace(call, headers=headers), reading


def build_call(call: ClientCall, pool: UpstreamPool, target: Target) -> UpstreamCall:
    """The upstream request of a generation for ``target``: the client's own bytes when the target
    speaks the client's format (the fast path), else the canonical request in its protocol."""
    if takes_fast_path(call.frontend, target.protocol):
        call.forwarded = True
        call.upstream_model = target.upstream_model
        return call.frontend.fast_request(call)
    key = (target.protocol, target.upstream_model)
    built = call.translated.get(key)
    if built is None:
        built = pool.adapter(target.protocol).build_request(call.canonical(), target.upstream_model)
        call.translated[key] = built
    return built


def build_embedding_call(frontend: EmbeddingFrontend, request: EmbeddingRequest, body: bytes,
                         pool: UpstreamPool, target: Target) -> UpstreamCall:
    """The upstream request of an embedding call for ``target`` (fast path as for generations)."""
    if takes_fast_path(frontend, target.protocol):
        return frontend.fast_embedding_request(body, request, target.upstream_model)
    return pool.adapter(target.protocol).build_embedding_request(request, target.upstream_model)
