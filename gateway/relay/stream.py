"""Streamed generation: relay an upstream stream chunk by chunk, watch the client, meter the end.

The response is an ASGI callable of its own (a Response only in name, not Starlette's
StreamingResponse) because it must run two things at once: pumping upstream chunks to the client
(``await send`` applies the server's backpressure, so a slow client slows the upstream read
instead of filling memory), and listening for ``http.disconnect``. A disconnect cancels the pump
and closes the upstream connection, which stops the generation upstream; the usage generated so
far is still metered. The first output (already read and translated: until it exists the attempt
may still fail over, nothing sent or charged) goes out with the head from the response's own task,
before the pump starts: a turn of the event loop sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import msgspec
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.accounts.records import Outcome
from gateway.relay.cache_serve import keep_later, relayed_answer
from gateway.relay.call import CallContext, ClientCall
from gateway.relay.canonical import (
    ChatRequest,
    ChatResponse,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
    UsageReport,
)
from gateway.relay.fallback import Route, attempt_models, build_for_model, fallback_headers
from gateway.relay.replay import cache_headers, events_response
from gateway.relay.tokens import estimate_request_tokens, estimate_text_tokens
from gateway.relay.translation import UpstreamCall, takes_fast_path
from gateway.runtime.errors import GatewayError
from gateway.runtime.secrets_scrub import scrub_secrets
from gateway.upstream.attempt import UpstreamFailure, upstream_io
from gateway.upstream.client import UpstreamAnswer
from gateway.upstream.pool import Target

log = logging.getLogger("gateway.relay.pipeline")
T = TypeVar("T", bound="StreamTransform")
# In every family's stream, an error the upstream sends in-band is an object under this key (a
# model's own text holds it only JSON-escaped), so only such rare chunks are scrubbed.
_ERROR_KEY = b'"error"'
# What a translator raises on upstream stream bytes it cannot read (the stream is then cut).
_UNREADABLE = (GatewayError, ValueError, msgspec.MsgspecError)
# The error events a stream ends with when it could not be completed (and its log row's message).
_SHUT_DOWN = "The gateway is shutting down: the stream ended before it was complete."
_CUT = "The upstream stream ended before it was complete."


class StreamTransform(Protocol):
    """What turns an upstream's stream bytes into the client's (``_Fast``, ``_Translate``, a
    family's own)."""

    content_type: str

    def feed(self, chunk: bytes) -> bytes: ...

    def close(self) -> bytes: ...

    def usage(self) -> Usage: ...

    @property
    def complete(self) -> bool: ...

    def error(self, status: int, code: str, message: str) -> bytes: ...


class _UsageWatch:
    """Usage as the canonical events report it, with an offline estimate to fall back on."""

    def __init__(self, request_for_estimate: ChatRequest | None, input_fallback: int = 0) -> None:
        self._request = request_for_estimate
        self._input_fallback = input_fallback
        self.reported: Usage | None = None
        self.start_usage: Usage | None = None
        self._output_texts: list[str] = []

    def see(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):
            self._output_texts.append(event.text)
        elif isinstance(event, ToolArgsDelta):
            self._output_texts.append(event.partial_json)
        elif isinstance(event, UsageReport):
            self.reported = event.usage
        elif isinstance(event, StreamStart) and event.usage is not None:
            self.start_usage = event.usage

    def estimate(self) -> Usage:
        known_input = self.start_usage.input_tokens if self.start_usage else 0
        if not known_input:
            known_input = (estimate_request_tokens(self._request) if self._request is not None
                           else self._input_fallback)
        output = sum(estimate_text_tokens(t) for t in self._output_texts)
        return Usage(input_tokens=known_input, output_tokens=output, estimated=True)

    def usage(self) -> Usage:
        return self.reported if self.reported is not None else self.estimate()


class _Translate:
    """Upstream protocol -> canonical events -> client wire."""

    def __init__(self, ctx: CallContext, call: ClientCall, target: Target) -> None:
        canonical = call.canonical()
        adapter = ctx.gateway.upstreams.adapter(target.protocol)
        self._decoder = adapter.stream_decoder(canonical, ctx.config.limits)
        self._encoder = call.frontend.stream_encoder(canonical, call)
        self.content_type = self._encoder.content_type
        self._public_model = ctx.model.id
        self._watch = _UsageWatch(canonical)
        # The answer's events, for the response cache when it keeps this call's (what an entry may
        # hold at most: past that, nothing is kept and nothing more collected).
        keeping = ctx.cache is not None and ctx.cache.store
        self._kept: list[StreamEvent] | None = [] if keeping else None
        self._kept_room = ctx.cache.entry_bytes if ctx.cache is not None else 0

    def _encode(self, events: list[StreamEvent]) -> bytes:
        out = []
        for event in events:
            if isinstance(event, StreamStart):
                event.model = self._public_model
            self._watch.see(event)
            out.append(self._encoder.encode(event))
        if self._kept is not None:
            self._kept_room -= sum(len(chunk) for chunk in out)
            if self._kept_room < 0:
                self._kept = None
            else:
                self._kept.extend(events)
        return b"".join(out)

    def answer(self) -> ChatResponse | None:
        """The whole answer the stream told, for the response cache; None when not collected."""
        return None if self._kept is None else events_response(self._kept, self.usage())

    def feed(self, chunk: bytes) -> bytes:
        return self._encode(self._decoder.feed(chunk))

    def close(self) -> bytes:
        out = self._encode(self._decoder.close())
        if self._decoder.complete and self._watch.reported is None:
            # The upstream reported no usage: the client still gets (flagged) numbers.
            out += self._encode([UsageReport(self._watch.estimate())])
        return out + self._encoder.close()

    def usage(self) -> Usage:
        return self._watch.usage()

    @property
    def complete(self) -> bool:
        return self._decoder.complete

    def error(self, status: int, code: str, message: str) -> bytes:
        return self._encoder.error(status, code, message)


class _Fast:
    """Same format both sides: bytes pass through; the watcher reads usage on the way."""

    def __init__(self, ctx: CallContext, call: ClientCall, target: Target, content_type: str) -> None:
        self._ctx = ctx
        self._call = call
        self._target = target
        self._stream = call.fast_stream = call.frontend.fast_stream(call, ctx.config.limits)
        # What the client was sent (references, not copies): for an estimate should usage never come.
        self._relayed: list[bytes] = []
        self.content_type = content_type

    def feed(self, chunk: bytes) -> bytes:
        return self._relay(self._stream.feed(chunk))

    def close(self) -> bytes:
        return self._relay(self._stream.close())

    def _relay(self, out: bytes) -> bytes:
        if out:
            if _ERROR_KEY in out:  # an upstream's in-band error, scrubbed as a relayed 4xx is
                out = scrub_secrets(out.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
            self._relayed.append(out)
        return out

    def usage(self) -> Usage:
        reported = self._stream.usage
        if reported is not None and reported.output_tokens > 0:
            return reported
        # No (complete) usage: decode what was relayed, once, on this rare path only.
        request = self._request_or_none()
        adapter = self._ctx.gateway.upstreams.adapter(self._target.protocol)
        decoder = adapter.stream_decoder(request or self._stub(), self._ctx.config.limits)
        watch = _UsageWatch(request, self._call.view.input_tokens_estimate)
        if reported is not None:
            watch.start_usage = reported
        for event in [*decoder.feed(b"".join(self._relayed)), *decoder.close()]:
            watch.see(event)
        return watch.usage() if watch.reported and watch.reported.output_tokens else watch.estimate()

    @property
    def complete(self) -> bool:
        return self._stream.complete

    def _request_or_none(self) -> ChatRequest | None:
        """The decoded request, or None for a body the upstream accepted but the full decoder
        rejects: that one still gets an estimate (from the body) and an error frame (from a stub)."""
        try:
            return self._call.canonical()
        except GatewayError:
            return None

    def _stub(self) -> ChatRequest:
        return ChatRequest(model=self._call.view.model, messages=[], stream=True)

    def error(self, status: int, code: str, message: str) -> bytes:
        request = self._request_or_none() or self._stub()
        return self._call.frontend.stream_encoder(request, self._call).error(status, code, message)

    def answer(self) -> ChatResponse | None:
        """The whole answer the relayed bytes told, for the response cache (``relayed_answer``)."""
        request = self._request_or_none()
        return None if request is None else relayed_answer(self._ctx, request, self._target.protocol,
                                                           self._relayed, self.usage())

    @property
    def relayed_bytes(self) -> int:
        return sum(len(chunk) for chunk in self._relayed)


async def open_stream(ctx: CallContext, call: ClientCall, targets: list[Target]) -> StreamRelay:
    """The relay of a generation stream (``open_relay``): bytes as they are when the upstream
    speaks the client's format, else translated through the canonical events."""

    def make(target: Target, response: UpstreamAnswer) -> StreamTransform:
        if takes_fast_path(call.frontend, target.protocol):
            return _Fast(ctx, call, target, response.headers.get("Content-Type", "text/event-stream"))
        return _Translate(ctx, call, target)

    relay, _ = await open_relay(ctx, targets, lambda t: build_for_model(ctx, call, t), make)
    return relay


async def open_relay(ctx: CallContext, targets: list[Target], build: Callable[[Target], UpstreamCall],
                     make: Callable[[Target, UpstreamAnswer], T],
                     route: Route | None = None) -> tuple[StreamRelay, T]:
    """Find an upstream whose stream gives the client its first output (``make`` gives the
    transform of the target that answered), then hand over to the relay. Until that output exists
    nothing is sent or charged, so an upstream that fails before it (a cut, an unreadable or
    oversized first event) is a failed attempt like a refused connection: the next upstream is
    tried, then the model's fallbacks (``gateway.relay.fallback``; ``route``: a fallback's targets
    for this call), or the client gets a 502."""

    async def start(target: Target, response: UpstreamAnswer) -> tuple[UpstreamAnswer, T, bytes]:
        try:
            transform = make(target, response)
            return response, transform, await _first_output(target, response, transform)
        except BaseException:
            response.close()
            raise

    target, (response, transform, first) = await attempt_models(ctx, targets, build, start, route)
    return StreamRelay(ctx, target, response, first, transform), transform


async def _first_output(target: Target, response: UpstreamAnswer, transform: StreamTransform) -> bytes:
    """Read and translate until there is something for the client; b"" for a stream that ended
    after some bytes without any (its end is then the relay's to judge, complete or cut)."""
    heard = False
    with upstream_io(target.name, "before the first output"):
        while chunk := await response.readany():
            heard = True
            try:
                out = transform.feed(chunk)
            except _UNREADABLE as exc:
                raise UpstreamFailure(target.name,
                                      f"unreadable stream before any output ({_reason(exc)})") from exc
            if out:
                return out
    if not heard:
        raise UpstreamFailure(target.name, "stream closed before the first chunk")
    return b""


def _reason(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


class StreamRelay(Response):
    """The ASGI response of a streamed call (see module docstring). A Response only so that a
    route may return it; it writes its own start and body, so Response's own state is unused."""

    def __init__(self, ctx: CallContext, target: Target, response: UpstreamAnswer, first: bytes,
                 transform: StreamTransform) -> None:  # no super().__init__: there is no body to render
        self.status_code = 200
        self.background = None
        self._ctx = ctx
        self._target = target
        self._response = response
        self._first = first
        self._transform = transform
        self._broken = False  # the upstream's stream broke or could not be read
        self._keeping = False  # the answer is complete and the response cache keeps it
        self._shutting_down = False  # the worker's grace is over (``shut_down``)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", self._transform.content_type.encode("latin-1")),
                   (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
        extra = fallback_headers(self._ctx) | cache_headers(self._ctx.cache)
        headers += [(k.lower().encode(), v.encode()) for k, v in extra.items()]
        outcome: Outcome = "client_disconnect"
        tasks: list[asyncio.Future[Any]] = []
        lifecycle = self._ctx.gateway.lifecycle
        try:
            # The first output goes out with the head, from this task: the pump's task would take
            # it a turn of the event loop later (the stream's time to first byte).
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            if self._first:
                await send({"type": "http.response.body", "body": self._first, "more_body": True})
            pump = asyncio.ensure_future(self._pump(send))
            tasks = [pump, asyncio.ensure_future(self._watch_disconnect(receive))]
            lifecycle.stream_opened(self)
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            if pump in done:
                outcome = pump.result()
        finally:
            lifecycle.stream_closed(self)
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError, UpstreamFailure):
                    await task
            self._settle(outcome)
        transform = self._transform
        if self._keeping and isinstance(transform, _Fast | _Translate):
            size = transform.relayed_bytes if isinstance(transform, _Fast) else 0
            await keep_later(scope, self._ctx, size, transform.answer)

    def shut_down(self) -> None:
        """The worker is stopping and its grace is over: the upstream connection is closed, so the
        pump ends the stream with the family's error event (outcome ``shutdown``)."""
        self._shutting_down = True
        self._response.stop()

    def _settle(self, outcome: Outcome) -> None:
        """Close the upstream and meter the call; once (the pump settles before its last bytes go
        out, so a client that has read the end of the stream finds the call metered)."""
        # Closing (not releasing) drops the connection, which stops the upstream generating.
        self._response.close()
        if self._ctx.finished:
            return
        usage = self._transform.usage()
        if outcome == "success" and usage.estimated:
            outcome = "usage_estimated"
        error_code, message = (("upstream_error", _CUT) if outcome == "upstream_cut"
                               else ("service_unavailable", _SHUT_DOWN) if outcome == "shutdown"
                               else (None, None))
        self._ctx.finish(200, outcome, usage, error_code=error_code, error_message=message)
        # A cut, shut or abandoned stream is never kept; a complete one once it is all sent.
        self._keeping = outcome in ("success", "usage_estimated") and self._ctx.cache is not None

    @staticmethod
    async def _watch_disconnect(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    def _unreadable(self, exc: BaseException) -> None:
        # An upstream answer its translator cannot read (or over a limit): the stream is as good
        # as cut. One line naming the upstream; a traceback would say nothing about the upstream.
        log.warning("unreadable upstream stream from %s: %s (request %s)", self._ctx.upstream, _reason(exc),
                    self._ctx.request_id)
        self._broken = True

    async def _pump(self, send: Send) -> Outcome:
        """The rest of the stream, after the first output (``__call__``), then its tail."""
        transform = self._transform
        try:
            if not self._broken:
                with upstream_io(self._target.name, "mid-stream"):
                    while chunk := await self._response.readany():
                        out = transform.feed(chunk)
                        if out:
                            await send({"type": "http.response.body", "body": out, "more_body": True})
        except UpstreamFailure:
            self._broken = True
        except _UNREADABLE as exc:
            self._unreadable(exc)
        tail = transform.close()
        outcome: Outcome = "success"
        if self._shutting_down:
            tail = transform.error(503, "service_unavailable", _SHUT_DOWN)
            outcome = "shutdown"
        elif self._broken or not transform.complete:
            tail = transform.error(502, "upstream_error", _CUT)
            outcome = "upstream_cut"
        self._settle(outcome)
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        return outcome
