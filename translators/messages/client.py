"""The Frontend of the message-protocol family (``POST /v1/messages``).

Stateless: ``MESSAGES`` serves every request. The client's ``anthropic-beta`` / ``vendorb-beta``
header values are read from the per-call ``ClientCall`` and passed upstream by both paths (the
fast path as the header itself, the translated path through ``ChatRequest.extra["anthropic-beta"]``,
see ``request``).
"""

from __future__ import annotations

from starlette.datastructures import Headers

from gateway.api import ClientCall, Frontend, LimitsConfig, RequestView, UpstreamCall
from gateway.api.canonical import ChatRequest, ChatResponse, Usage
from gateway.api.relay import holds_sealed
from translators.messages import fastpath, request, response
from translators.messages.stream_encode import MessagesStreamEncoder
from translators.messages.upstream import MessagesAdapter

BETA_HEADERS = ("anthropic-beta", "vendorb-beta")


def beta_header(headers: Headers) -> str | None:
    """The client's beta tags (both header spellings, repeated headers joined by commas)."""
    values = [v.strip() for name in BETA_HEADERS for v in headers.getlist(name) if v.strip()]
    return ",".join(values) if values else None


class MessagesFrontend(Frontend):
    family = "messages"

    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
        return request.peek(body)

    def decode_request(self, call: ClientCall) -> ChatRequest:
        view = call.view
        return request.decode(call.body, beta_header(call.headers),
                              raw=view.raw if isinstance(view, request.MessagesView) else None)

    def encode_response(self, response_: ChatResponse, request_: ChatRequest) -> bytes:
        return response.encode_response(response_, request_)

    def stream_encoder(self, request_: ChatRequest, call: ClientCall) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(request_)

    # --- same-format fast path -------------------------------------------------------------------

    def fast_request(self, call: ClientCall) -> UpstreamCall:
        if holds_sealed(call.body):  # another format's reasoning state: see gateway.relay.reasoning_state
            return MessagesAdapter().build_request(call.canonical(), call.upstream_model or call.view.model)
        return fastpath.fast_request(call.body, call.view, call.upstream_model or call.view.model,
                                     beta_header(call.headers))

    def fast_usage(self, body: bytes) -> Usage | None:
        return fastpath.fast_usage(body)

    def fast_stream(self, call: ClientCall, limits: LimitsConfig) -> fastpath.FastStream:
        return fastpath.FastStream(call.public_model, max_event_bytes=limits.sse_event_bytes)

    def fast_response(self, body: bytes, call: ClientCall, public_model: str) -> bytes:
        return fastpath.fast_response(body, public_model)


MESSAGES = MessagesFrontend()
