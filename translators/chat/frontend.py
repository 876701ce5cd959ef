"""The chat family's Frontend for ``POST /v1/chat/completions``."""

from __future__ import annotations

from gateway.canonical import ChatRequest, ChatResponse
from gateway.errors import InvalidRequest
from translators.chat.fastpath import OpenAIFastPath, peek_request, rough_request
from translators.chat.request import decode_chat_request
from translators.chat.response import ChatStreamEncoder, encode_chat_response


class ChatFrontend(OpenAIFastPath):
    """One instance per request (the fast path remembers whether the model was aliased)."""

    family = "chat"
    upstream_path = "/v1/chat/completions"

    def decode_request(self, body: bytes, path_model: str | None, stream_hint: bool) -> ChatRequest:
        try:
            return decode_chat_request(body)
        except InvalidRequest:
            if not self._forwarded:
                raise
            # A same-format upstream already accepted these bytes; the canonical form is only
            # wanted for an offline estimate, so an untranslatable part must not fail the call.
            return rough_request(body, peek_request(body, path_model).model)

    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes:
        return encode_chat_response(response, request)

    def stream_encoder(self, request: ChatRequest) -> ChatStreamEncoder:
        return ChatStreamEncoder(request)
