"""What a streamed relay does to each upstream chunk on its way to the client: the
``StreamTransform`` of a call, bytes as they are when the upstream speaks the client's format
(``FastTransform``: usage read on the way, in-band errors scrubbed) or translated through the
canonical events (``TranslatingTransform``), with the usage to charge either way (``UsageWatch``:
as reported, else estimated offline). The relay that drives them is ``gateway.relay.stream``."""

from __future__ import annotations

from typing import Protocol

from gateway.relay.cache_serve import relayed_answer
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
from gateway.relay.replay import events_response
from gateway.relay.tokens import estimate_request_tokens, estimate_text_tokens
from gateway.runtime.errors import GatewayError
from gateway.runtime.secrets_scrub import scrub_secrets
from gateway.upstream.pool import Target

# In every family's stream, an error the upstream sends in-band is an object under this key (a
# model's own text holds it only JSON-escaped), so only such rare chunks are scrubbed.
_ERROR_KEY = b'"error"'


class StreamTransform(Protocol):
    """What turns an upstream's stream bytes into the client's (``FastTransform``, ``TranslatingTransform``, a
    family's own)."""

    content_type: str

    def feed(self, chunk: bytes) -> bytes: ...

    def close(self) -> bytes: ...

    def usage(self) -> Usage: ...

    @property
    def complete(self) -> bool: ...

    def error(self, status: int, code: str, message: str) -> bytes: ...


class UsageWatch:
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


class TranslatingTransform:
    """Upstream protocol -> canonical events -> client wire."""

    def __init__(self, ctx: CallContext, call: ClientCall, target: Target) -> None:
        canonical = call.canonical()
        adapter = ctx.gateway.upstreams.adapter(target.protocol)
        self._decoder = adapter.stream_decoder(canonical, ctx.config.limits)
        self._encoder = call.frontend.stream_encoder(canonical, call)
        self.content_type = self._encoder.content_type
        self._public_model = ctx.model.id
        self._watch = UsageWatch(canonical)
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


class FastTransform:
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
        watch = UsageWatch(request, self._call.view.input_tokens_estimate)
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
