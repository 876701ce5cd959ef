"""The upstream adapter for protocol ``chat``: canonical requests -> OpenAI wire, answers back.

Used when a client of another family (messages, v1beta) reaches an OpenAI-compatible upstream; a
chat client gets the fast path instead (``translators.chat.fastpath``), so ``ChatRequest.extra``
(which holds another family's unmapped fields) is not sent. Mapping choices:

* ``system`` -> one leading ``system`` message; ``ToolResultPart`` -> ``tool`` messages placed
  before the rest of their user message (OpenAI wants them right after the assistant's calls);
  images inside a tool result, which a tool message cannot hold, follow in that user message;
* thinking in the assistant history is dropped (OpenAI-compatible servers reject or ignore it);
* images -> ``image_url`` (URL or data URL); documents -> ``file`` parts (inline data) or text;
* ``Thinking`` -> ``reasoning_effort`` (a budget maps to low/medium/high) and then
  ``max_completion_tokens`` (what reasoning models take); otherwise ``max_tokens``, which every
  OpenAI-compatible server knows;
* streams always ask for ``stream_options.include_usage``: usage is what the call is billed by.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from gateway.api import LimitsConfig, UpstreamCall, UpstreamError
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
    ResponseFormat,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    Usage,
)
from gateway.api.relay import scrub_secrets
from gateway.api.wire import data_url
from translators.chat.azure import AZURE
from translators.chat.embeddings import base64_to_floats
from translators.chat.mapping import effort_for_budget, now, stop_reason, usage_from_wire, wire_id
from translators.chat.stream_decode import ChatStreamDecoder
from translators.chat.wire import (
    ChoiceView,
    answer_decoder,
    embedding_list_decoder,
    error_decoder,
)

Json = dict[str, Any]


class ChatAdapter:
    protocol = "chat"
    capabilities = frozenset({"generate", "embed"})  # text: an UpstreamAdapter
    version_prefix = "/v1"  # standard paths start with it; a base_url ending in it is not doubled
    url_styles = {"azure": AZURE}  # ``style: azure``: Azure OpenAI deployments

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    # --- generation --------------------------------------------------------------------------------

    def build_request(self, request: ChatRequest, upstream_model: str) -> UpstreamCall:
        # msgspec, not orjson: a client's integers may be wider than 64 bits (a tool schema's
        # ``maximum``, a v1beta ``seed``); the upstream, not the encoder, is to judge them.
        body = msgspec.json.encode(build_body(request, upstream_model))
        return UpstreamCall(path="/v1/chat/completions", body=body)

    def decode_response(self, body: bytes, request: ChatRequest) -> ChatResponse:
        try:
            answer = answer_decoder.decode(body)
        except msgspec.MsgspecError as exc:
            raise UpstreamError("The upstream answered with a body that is not a chat completion.") from exc
        if answer.error is not None:
            raise UpstreamError(f"The upstream reported an error: {scrub_secrets(_error_text(answer.error))}")
        candidates = [_candidate(choice) for choice in answer.choices or []]
        return ChatResponse(id=answer.id or wire_id("chatcmpl-", None), model=answer.model or request.model,
                            created=int(answer.created or 0) or now(), candidates=candidates,
                            usage=usage_from_wire(answer.usage) if answer.usage is not None else Usage())

    def stream_decoder(self, request: ChatRequest, limits: LimitsConfig) -> ChatStreamDecoder:
        return ChatStreamDecoder(request, max_event_bytes=limits.sse_event_bytes)

    # --- embeddings --------------------------------------------------------------------------------

    def build_embedding_request(self, request: EmbeddingRequest, upstream_model: str) -> UpstreamCall:
        tokens = request.token_inputs
        body: Json = {"model": upstream_model, "input": tokens if tokens else request.inputs,
                      "encoding_format": "float"}
        if request.dimensions is not None:
            body["dimensions"] = request.dimensions
        if request.user is not None:
            body["user"] = request.user
        return UpstreamCall(path="/v1/embeddings", body=msgspec.json.encode(body))  # see build_request

    def decode_embedding_response(self, body: bytes, request: EmbeddingRequest) -> EmbeddingResponse:
        try:
            answer = embedding_list_decoder.decode(body)
        except msgspec.MsgspecError as exc:
            raise UpstreamError("The upstream answered with a body that is not an embedding list.") from exc
        vectors = [item.embedding if isinstance(item.embedding, list) else base64_to_floats(item.embedding)
                   for item in sorted(answer.data, key=lambda item: item.index or 0)]
        usage = Usage(input_tokens=answer.usage.prompt_tokens or 0) if answer.usage is not None else Usage()
        return EmbeddingResponse(model=answer.model or request.model, vectors=vectors, usage=usage)

    def error_message(self, body: bytes) -> str:
        try:
            view = error_decoder.decode(body)
        except msgspec.MsgspecError:
            return body[:500].decode("utf-8", "replace").strip()
        if view.error is not None:
            return _error_text(view.error)
        return view.message or body[:500].decode("utf-8", "replace").strip()

    def context_too_long(self, status: int, body: bytes) -> bool:
        """OpenAI's refusal of an input over the model's context (code ``context_length_exceeded``;
        servers of the same API without that code say "maximum context length"): the model's
        fallbacks are then tried (``gateway.api.relay.attempt_models``)."""
        if status not in (400, 413):
            return False
        try:
            view = error_decoder.decode(body)
        except msgspec.MsgspecError:
            return False
        error = view.error
        if isinstance(error, dict) and error.get("code") == "context_length_exceeded":
            return True
        message = _error_text(error) if error is not None else view.message or ""
        return "maximum context length" in message.lower()


# --- request building ---------------------------------------------------------------------------------


def build_body(request: ChatRequest, upstream_model: str) -> Json:
    body: Json = {"model": upstream_model, "messages": _messages(request)}
    if request.thinking is not None and request.thinking.enabled:
        effort = request.thinking.effort
        if effort is None and request.thinking.budget_tokens is not None:
            effort = effort_for_budget(request.thinking.budget_tokens)
        body["reasoning_effort"] = effort or "medium"
        if request.max_tokens is not None:
            body["max_completion_tokens"] = request.max_tokens
    elif request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    optional: Json = {"temperature": request.temperature, "top_p": request.top_p, "seed": request.seed,
                      "presence_penalty": request.presence_penalty,
                      "frequency_penalty": request.frequency_penalty, "logprobs": request.logprobs,
                      "top_logprobs": request.top_logprobs, "user": request.user,
                      "parallel_tool_calls": request.parallel_tool_calls if request.tools else None}
    body.update((key, value) for key, value in optional.items() if value is not None)
    if request.stop:
        body["stop"] = request.stop
    if request.n > 1:
        body["n"] = request.n
    if request.tools:
        body["tools"] = [_tool(t.name, t.description, t.parameters) for t in request.tools]
    if request.tool_choice is not None:
        body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.response_format is not None:
        body["response_format"] = _response_format(request.response_format)
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _tool(name: str, description: str | None, parameters: dict[str, Any]) -> Json:
    function: Json = {"name": name}
    if description:
        function["description"] = description
    function["parameters"] = parameters or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def _tool_choice(choice: ToolChoice) -> Any:
    if choice.mode == "tool" and choice.name:
        return {"type": "function", "function": {"name": choice.name}}
    return {"any": "required", "none": "none"}.get(choice.mode, "auto")


def _response_format(fmt: ResponseFormat) -> Json:
    if fmt.type != "json_schema":
        return {"type": fmt.type}
    schema: Json = {"name": fmt.name or "response", "schema": fmt.json_schema or {}}
    if fmt.strict is not None:
        schema["strict"] = fmt.strict
    return {"type": "json_schema", "json_schema": schema}


def _messages(request: ChatRequest) -> list[Json]:
    out: list[Json] = []
    system = "\n\n".join(p.text for p in request.system if p.text)
    if system:
        out.append({"role": "system", "content": system})
    for message in request.messages:
        if message.role == "assistant":
            out.append(_assistant(message))
        else:
            out.extend(_user(message))
    return out


def _assistant(message: Message) -> Json:
    text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
    calls = [{"id": p.id, "type": "function", "function": {"name": p.name, "arguments": p.arguments or "{}"}}
             for p in message.parts if isinstance(p, ToolCallPart)]
    wire: Json = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        wire["tool_calls"] = calls
    return wire


def _user(message: Message) -> list[Json]:
    out: list[Json] = []
    content: list[Json] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            text = "".join(p.text for p in part.content if isinstance(p, TextPart))
            if part.is_error:
                text = f"Error: {text}" if text else "Error"
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": text})
            content.extend(_content_part(p) for p in part.content if isinstance(p, ImagePart))
        elif not isinstance(part, ThinkingPart | ToolCallPart):
            content.append(_content_part(part))
    if content:
        only_text = all(c["type"] == "text" for c in content)
        value: Any = "".join(c["text"] for c in content) if only_text and len(content) == 1 else content
        out.append({"role": "user", "content": value})
    return out


def _content_part(part: Part) -> Json:
    if isinstance(part, ImagePart):
        url = part.url or data_url(part.media_type or "image/png", part.data or "")
        image: Json = {"url": url}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(part, DocumentPart):
        if part.text is not None:
            title = f"{part.title}\n\n" if part.title else ""
            return {"type": "text", "text": title + part.text}
        if part.data is not None:
            name = part.title or "document.pdf"
            return {"type": "file", "file": {"filename": name,
                                             "file_data": data_url(part.media_type or "application/pdf",
                                                                   part.data)}}
        return {"type": "text", "text": f"[document: {part.url}]"}
    assert isinstance(part, TextPart)
    return {"type": "text", "text": part.text}


# --- answer decoding ----------------------------------------------------------------------------------


def _candidate(choice: ChoiceView) -> Candidate:
    message = choice.message or choice.delta
    parts: list[Part] = []
    if message is not None:
        thinking = message.reasoning_content or message.reasoning
        if thinking:
            parts.append(ThinkingPart(text=thinking))
        content = message.content
        text = content if isinstance(content, str) else "".join(
            str(p.get("text") or "") for p in content or [] if isinstance(p, dict))
        if text:
            parts.append(TextPart(text))
        if message.refusal:
            parts.append(TextPart(message.refusal))
        for call in message.tool_calls or []:
            fn = call.function
            parts.append(ToolCallPart(id=call.id or wire_id("call_", None),
                                      name=(fn.name if fn else None) or "",
                                      arguments=(fn.arguments if fn else None) or "{}"))
    if choice.text:
        parts.append(TextPart(choice.text))
    reason = stop_reason(choice.finish_reason)
    if reason == "end_turn" and any(isinstance(p, ToolCallPart) for p in parts):
        reason = "tool_use"
    return Candidate(index=choice.index or 0, parts=parts, stop_reason=reason)


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or orjson.dumps(error).decode())
    return str(error)
