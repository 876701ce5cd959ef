"""The chat family's Frontend for ``POST /v1/chat/completions``."""

from __future__ import annotations

from gateway.api import ClientCall, InvalidRequest
from gateway.api.canonical import ChatRequest, ChatResponse
from translators.chat.fastpath import ChatView, OpenAIFastPath
from translators.chat.request import decode_chat_request
from translators.chat.response import ChatStreamEncoder, encode_chat_response


class ChatFrontend(OpenAIFastPath):
    """Stateless: ``CHAT`` serves every request."""

    family = "chat"
    upstream_path = "/v1/chat/completions"

    def decode_request(self, call: ClientCall) -> ChatRequest:
        view = call.view
        try:
            return decode_chat_request(call.body, view.chat if isinstance(view, ChatView) else None)
        except InvalidRequest as err:
            return self.lenient(call, err)

    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes:
        return encode_chat_response(response, request)

    def stream_encoder(self, request: ChatRequest, call: ClientCall) -> ChatStreamEncoder:
        return ChatStreamEncoder(request)


CHAT = ChatFrontend()
