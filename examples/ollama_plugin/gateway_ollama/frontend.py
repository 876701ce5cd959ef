"""The Frontends of ``/api/chat`` and ``/api/generate`` (``gateway.api.Frontend``).

``peek`` decodes and validates the whole request, so that a malformed body is a 400 naming the
field even when the upstream speaks Ollama too and would get the bytes untouched (this family is
not the hot path; the cost is one msgspec decode). The objects hold no state: what one request
needs is in its ``ClientCall``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gateway.api import Frontend, RequestView, UpstreamCall
from gateway.api.canonical import ChatRequest, ChatResponse, Usage
from gateway.api.relay import estimate_request_tokens

from gateway_ollama.client import decode_chat, decode_generate
from gateway_ollama.encode import Mode, NdjsonEncoder, encode_answer
from gateway_ollama.fastpath import NdjsonFastStream, forward_body, read_usage, with_model

if TYPE_CHECKING:
    from gateway.api import ClientCall, LimitsConfig

FAMILY = "ollama"


class OllamaFrontend(Frontend):
    family = FAMILY

    def __init__(self, mode: Mode) -> None:
        self.mode: Mode = mode
        self.path = "/api/chat" if mode == "chat" else "/api/generate"
        self._decode: Callable[[bytes], ChatRequest] = decode_chat if mode == "chat" else decode_generate

    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
        request = self._decode(body)
        return RequestView(model=request.model, stream=request.stream, max_tokens=request.max_tokens,
                           input_tokens_estimate=estimate_request_tokens(request))

    def decode_request(self, call: ClientCall) -> ChatRequest:
        return self._decode(call.body)

    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes:
        return encode_answer(self.mode, response)

    def stream_encoder(self, request: ChatRequest, call: ClientCall) -> NdjsonEncoder:
        return NdjsonEncoder(self.mode, request)

    # --- same-format fast path --------------------------------------------------------------

    def fast_request(self, call: ClientCall) -> UpstreamCall:
        upstream_model = call.upstream_model or call.view.model
        return UpstreamCall(path=self.path, body=forward_body(call.body, call.view.model, upstream_model))

    def fast_usage(self, body: bytes) -> Usage | None:
        return read_usage(body)

    def fast_stream(self, call: ClientCall, limits: LimitsConfig) -> NdjsonFastStream:
        return NdjsonFastStream(call.view.model, max_line_bytes=limits.stream_element_bytes)

    def fast_response(self, body: bytes, call: ClientCall, public_model: str) -> bytes:
        return with_model(body, public_model)
