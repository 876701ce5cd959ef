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
from typing import Any, TypeVar

import msgspec
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.accounts.records import Outcome
from gateway.relay.cache_serve import keep_later
from gateway.relay.call import CallContext, ClientCall
from gateway.relay.fallback import Route, attempt_models, build_for_model, fallback_headers
from gateway.relay.replay import cache_headers
from gateway.relay.stream_transforms import FastTransform, StreamTransform, TranslatingTransform
from gateway.relay.translation import UpstreamCall, takes_fast_path
from gateway.runtime.errors import GatewayError
from gateway.upstream.attempt import UpstreamFailure, upstream_io
from gateway.upstream.client import UpstreamAnswer
from gateway.upstream.pool import Target

log = logging.getLogger("gateway.relay.pipeline")
T = TypeVar("T", bound="StreamTransform")
# What a translator raises on upstream stream bytes it cannot read (the stream is then cut).
_UNREADABLE = (GatewayError, ValueError, msgspec.MsgspecError)
# The error events a stream ends with when it could not be completed (and its log row's message).
_SHUT_DOWN = "The gateway is shutting down: the stream ended before it was complete."
_CUT = "The upstream stream ended before it was complete."


async def open_stream(ctx: CallContext, call: ClientCall, targets: list[Target]) -> StreamRelay:
    """The relay of a generation stream (``open_relay``): bytes as they are when the upstream
    speaks the client's format, else translated through the canonical events."""

    def make(target: Target, response: UpstreamAnswer) -> StreamTransform:
        if takes_fast_path(call.frontend, target.protocol):
            return FastTransform(ctx, call, target, response.headers.get("Content-Type", "text/event-stream"))
        return TranslatingTransform(ctx, call, target)

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
        if self._keeping and isinstance(transform, FastTransform | TranslatingTransform):
            size = transform.relayed_bytes if isinstance(transform, FastTransform) else 0
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
