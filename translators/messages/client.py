"""The Frontend of the message-protocol family (``POST /v1/messages``).

One instance serves one request: it is built by the route with the client's ``anthropic-beta`` /
``vendorb-beta`` header value, which both paths pass upstream (the fast path as the header itself,
the translated path through ``ChatRequest.extra["anthropic-beta"]``, see ``request``).
"""

from __future__ import annotations

from gateway.canonical import ChatRequest, ChatResponse, Usage
from gateway.translation import RequestView, UpstreamCall
from translators.messages import fastpath, request, response
from translators.messages.stream_encode import MessagesStreamEncoder


class MessagesFrontend:
    family = "messages"

    def __init__(self, beta: str | None = None) -> None:
        self.beta = beta or None

    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
        return request.peek(body)

    def decode_request(self, body: bytes, path_model: str | None, stream_hint: bool) -> ChatRequest:
        return request.decode(body, self.beta)

    def encode_response(self, response_: ChatResponse, request_: ChatRequest) -> bytes:
        return response.encode_response(response_, request_)

    def stream_encoder(self, request_: ChatRequest) -> MessagesStreamEncoder:
        return MessagesStreamEncoder(request_)

    # --- same-format fast path -------------------------------------------------------------------

    def fast_request(self, body: bytes, view: RequestView, upstream_model: str) -> UpstreamCall:
        return fastpath.fast_request(body, view, upstream_model, self.beta)

    def fast_usage(self, body: bytes) -> Usage | None:
        return fastpath.fast_usage(body)

    def fast_stream(self, view: RequestView) -> fastpath.FastStream:
        return fastpath.FastStream(view.model)

    def fast_response(self, body: bytes, view: RequestView, public_model: str) -> bytes:
        return fastpath.fast_response(body, public_model)
