"""Upstream side: the adapter for upstreams of protocol ``messages`` (Anthropic Messages API).

Requests go to ``POST {base_url}/v1/messages`` with ``x-api-key``, ``anthropic-version: 2023-06-01``
and, when the client sent one, ``anthropic-beta`` (from ``ChatRequest.extra["anthropic-beta"]``).

Canonical -> wire choices worth knowing:

* ``max_tokens`` is required by the protocol: a request without one gets ``DEFAULT_MAX_TOKENS``.
* ``temperature`` is clamped to the protocol's 0-1 range (chat clients may send up to 2).
* Thinking: a token budget -> ``thinking {type: enabled, budget_tokens}`` (lowered below
  ``max_tokens`` when needed, as the protocol counts thinking inside it); an effort level alone ->
  ``thinking {type: adaptive}`` plus ``output_config.effort``; ``enabled=False`` -> ``disabled``.
* Empty text parts are left out (the protocol refuses empty text blocks).
* Thinking parts without a signature of this protocol (reasoning from another vendor, replayed by
  the client) are dropped: the protocol refuses unsigned thinking blocks; signatures and redacted
  thinking go back exactly as the upstream issued them (``gateway.relay.reasoning_state``).
* Consecutive messages of one role are merged (the protocol wants alternation); empty ones dropped.
* ``response_format`` json_schema -> ``output_config.format``; ``json_object`` has no equivalent and
  is left out. ``seed``, penalties, ``logprobs`` and ``n`` have none either.
* ``extra["messages"]`` (fields only a message-protocol client sends) is merged into the body
  without overriding mapped fields; other ``extra`` keys belong to other formats and are ignored.

Usage read back: the protocol's ``input_tokens`` excludes cache tokens; canonical input adds
``cache_creation_input_tokens`` and ``cache_read_input_tokens`` back in (see ``mapping``).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from gateway.api import InvalidRequest, LimitsConfig, UpstreamCall, UpstreamError
from gateway.api.canonical import (
    Candidate,
    ChatRequest,
    ChatResponse,
    DocumentPart,
    EmbeddingRequest,
    EmbeddingResponse,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from gateway.api.relay import for_upstream
from gateway.api.wire import inline_data
from translators.messages import wire
from translators.messages.mapping import stop_reason_in, thinking_share, usage_in
from translators.messages.request import BETA_EXTRA, FIELDS_EXTRA
from translators.messages.response import tool_input
from translators.messages.stream_decode import PROTOCOL, MessagesStreamDecoder

API_VERSION = "2023-06-01"
MESSAGES_PATH = "/v1/messages"
DEFAULT_MAX_TOKENS = 4096


def _cache(part: Any) -> dict[str, Any]:
    cc = getattr(part, "cache_control", None)
    if cc is None:
        return {}
    # Built by hand: the canonical Struct omits its default ``type``, which the protocol requires.
    value: dict[str, Any] = {"type": cc.type}
    if cc.ttl:
        value["ttl"] = cc.ttl
    return {"cache_control": value}


def _image(part: ImagePart) -> dict[str, Any]:
    if part.data is not None:
        source: dict[str, Any] = {"type": "base64", "media_type": part.media_type or "image/png",
                                  "data": part.data}
    else:
        url = part.url or ""
        inline = inline_data(url)
        if inline is not None:  # an image inlined as a data URL goes as the protocol's base64 source
            media_type = inline.media_type if inline.explicit_type else part.media_type or "image/png"
            source = {"type": "base64", "media_type": media_type, "data": inline.data}
        else:
            source = {"type": "url", "url": url}
    return {"type": "image", "source": source, **_cache(part)}


def _document(part: DocumentPart) -> dict[str, Any]:
    if part.text is not None:
        source: dict[str, Any] = {"type": "text", "media_type": "text/plain", "data": part.text}
    elif part.data is not None:
        source = {"type": "base64", "media_type": part.media_type or "application/pdf", "data": part.data}
    else:
        source = {"type": "url", "url": part.url or ""}
    block: dict[str, Any] = {"type": "document", "source": source, **_cache(part)}
    if part.title:
        block["title"] = part.title
    return block


def _block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        # The protocol refuses empty text blocks; other formats allow empty content.
        return {"type": "text", "text": part.text, **_cache(part)} if part.text else None
    if isinstance(part, ImagePart):
        return _image(part)
    if isinstance(part, DocumentPart):
        return _document(part)
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part.arguments)}
    if isinstance(part, ToolResultPart):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id, **_cache(part)}
        content = [b for b in map(_block, part.content) if b is not None]
        if content:
            block["content"] = content
        if part.is_error:
            block["is_error"] = True
        return block
    if isinstance(part, ThinkingPart):
        own = for_upstream(part, PROTOCOL)
        if own is None:
            return None
        if own.redacted:
            return {"type": "redacted_thinking", "data": own.data or ""}
        if not own.signature:
            return None
        return {"type": "thinking", "thinking": own.text, "signature": own.signature}
    return None


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = [b for b in map(_block, message.parts) if b is not None]
        if message.role == "user":
            # The protocol wants tool results first in a user turn.
            blocks.sort(key=lambda b: b["type"] != "tool_result")
        if not blocks:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"].extend(blocks)
            if message.role == "user":
                out[-1]["content"].sort(key=lambda b: b["type"] != "tool_result")
        else:
            out.append({"role": message.role, "content": blocks})
    return out


def _system(request: ChatRequest) -> str | list[dict[str, Any]] | None:
    if not request.system:
        return None
    if len(request.system) == 1 and request.system[0].cache_control is None:
        return request.system[0].text
    return [{"type": "text", "text": p.text, **_cache(p)} for p in request.system]


def build_body(request: ChatRequest, upstream_model: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": upstream_model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": _messages(request.messages),
    }
    system = _system(request)
    if system is not None:
        body["system"] = system
    if request.temperature is not None:
        body["temperature"] = min(max(request.temperature, 0.0), 1.0)
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.top_k is not None:
        body["top_k"] = request.top_k
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if request.stream:
        body["stream"] = True
    if request.tools:
        body["tools"] = [{"name": t.name, **({"description": t.description} if t.description else {}),
                          "input_schema": t.parameters or {"type": "object", "properties": {}}, **_cache(t)}
                         for t in request.tools]
    choice = _tool_choice(request)
    if choice is not None:
        body["tool_choice"] = choice
    output_config: dict[str, Any] = {}
    thinking = request.thinking
    if thinking is not None:
        if not thinking.enabled:
            body["thinking"] = {"type": "disabled"}
        elif thinking.budget_tokens is not None:
            # The budget counts inside max_tokens here and must stay below it.
            budget = min(thinking.budget_tokens, body["max_tokens"] - 1)
            body["thinking"] = {"type": "enabled", "budget_tokens": max(budget, 1)}
        else:
            body["thinking"] = {"type": "adaptive"}
        if thinking.effort is not None:
            output_config["effort"] = thinking.effort
    fmt = request.response_format
    if fmt is not None and fmt.type == "json_schema" and fmt.json_schema is not None:
        output_config["format"] = {"type": "json_schema", "schema": fmt.json_schema}
    if request.user:
        body["metadata"] = {"user_id": request.user}
    extra = request.extra.get(FIELDS_EXTRA)
    if isinstance(extra, dict):
        kept = extra.get("output_config")
        if isinstance(kept, dict):
            output_config = {**kept, **output_config}
        for key, value in extra.items():
            body.setdefault(key, value)
    if output_config:
        body["output_config"] = output_config
    return body


def _tool_choice(request: ChatRequest) -> dict[str, Any] | None:
    choice = request.tool_choice
    if choice is None and request.parallel_tool_calls is not False:
        return None
    mode = choice.mode if choice is not None else "auto"
    if mode == "tool" and choice is not None and choice.name:
        out: dict[str, Any] = {"type": "tool", "name": choice.name}
    elif mode in ("auto", "any", "none"):
        out = {"type": mode}
    else:
        out = {"type": "any"}
    if request.parallel_tool_calls is False and mode != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _part(block: wire.ResponseBlock) -> Part | None:
    kind = block.type
    if kind == "text":
        return TextPart(text=block.text or "")
    if kind == "thinking":
        return ThinkingPart(text=block.thinking or "", signature=block.signature or None,
                            origin=PROTOCOL if block.signature else None)
    if kind == "redacted_thinking":
        return ThinkingPart(redacted=True, data=block.data, origin=PROTOCOL)
    if kind == "tool_use":
        arguments = bytes(block.input).decode() or "{}"
        return ToolCallPart(id=block.id or "", name=block.name or "", arguments=arguments)
    return None  # server-tool blocks and their results have no canonical form


class MessagesAdapter:
    protocol = PROTOCOL
    capabilities = frozenset({"generate", "embed"})  # text: an UpstreamAdapter
    version_prefix = "/v1"  # standard paths start with it; a base_url ending in it is not doubled

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key, "anthropic-version": API_VERSION}

    def build_request(self, request: ChatRequest, upstream_model: str) -> UpstreamCall:
        headers: dict[str, str] = {}
        beta = request.extra.get(BETA_EXTRA)
        if isinstance(beta, str) and beta:
            headers["anthropic-beta"] = beta
        # msgspec, not orjson: a client's integers may be wider than 64 bits (a tool schema's
        # ``maximum``, a v1beta ``topK``); the upstream, not the encoder, is to judge them.
        return UpstreamCall(path=MESSAGES_PATH, body=msgspec.json.encode(build_body(request, upstream_model)),
                            headers=headers)

    def decode_response(self, body: bytes, request: ChatRequest) -> ChatResponse:
        try:
            message = wire.response_decoder.decode(body)
        except wire.DECODE_ERRORS as exc:
            raise UpstreamError(f"The upstream sent an invalid message-protocol answer: {exc}") from exc
        if message.type == "error" or message.error is not None:
            raise UpstreamError("The upstream answered 200 with an error instead of a message.")
        parts = [p for p in map(_part, message.content) if p is not None]
        candidate = Candidate(parts=parts, stop_reason=stop_reason_in(message.stop_reason) or "end_turn",
                              stop_sequence=message.stop_sequence)
        thinking = "".join(p.text for p in parts if isinstance(p, ThinkingPart))
        visible = "".join(p.text if isinstance(p, TextPart) else f"{p.name} {p.arguments}"
                          for p in parts if isinstance(p, TextPart | ToolCallPart))
        usage = thinking_share(usage_in(message.usage) or Usage(), thinking, visible)
        return ChatResponse(id=message.id, model=message.model or request.model, created=int(time.time()),
                            candidates=[candidate], usage=usage)

    def stream_decoder(self, request: ChatRequest, limits: LimitsConfig) -> MessagesStreamDecoder:
        return MessagesStreamDecoder(max_event_bytes=limits.sse_event_bytes)

    def build_embedding_request(self, request: EmbeddingRequest, upstream_model: str) -> UpstreamCall:
        raise InvalidRequest(f"The model `{request.model}` does not support embeddings "
                             "(its upstream speaks the message protocol).")

    def decode_embedding_response(self, body: bytes, request: EmbeddingRequest) -> EmbeddingResponse:
        raise UpstreamError("The message protocol has no embeddings answer to decode.")

    def error_message(self, body: bytes) -> str:
        try:
            error = wire.error_decoder.decode(body).error
        except wire.DECODE_ERRORS:
            return body[:500].decode("utf-8", "replace").strip()
        if error is None:
            return body[:500].decode("utf-8", "replace").strip()
        return error.message or error.type

    def context_too_long(self, status: int, body: bytes) -> bool:
        """Anthropic's refusal of an input over the model's context: 400 ``invalid_request_error``
        "prompt is too long: N tokens > M maximum" (the model's fallbacks are then tried)."""
        if status != 400:
            return False
        try:
            error = wire.error_decoder.decode(body).error
        except wire.DECODE_ERRORS:
            return False
        return error is not None and (error.message or "").lower().startswith("prompt is too long")
