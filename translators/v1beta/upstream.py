"""The upstream adapter for protocol ``v1beta``: canonical requests as Gemini wire requests, and
Gemini answers (whole, streamed, embeddings) back in canonical form."""

from __future__ import annotations

import time
import uuid
from typing import Any

import msgspec

from gateway.api import LimitsConfig, StreamDecoder, UpstreamCall, UpstreamError
from gateway.api.canonical import (
    Candidate,
    ChatRequest,
    ChatResponse,
    EmbeddingRequest,
    EmbeddingResponse,
    Message,
    Thinking,
    ToolCallPart,
    Usage,
)
from gateway.api.relay import estimate_text_tokens
from translators.v1beta import wire
from translators.v1beta.mapping import stop_reason, usage_from_wire
from translators.v1beta.parts import CallIds, to_canonical, to_wire, tool_names
from translators.v1beta.stream_decode import GeminiStreamDecoder, calls_in

# Budgets for an effort level (chat family's reasoning_effort), as Gemini's own OpenAI-compatible
# endpoint maps them.
_EFFORT_BUDGET = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
_ROLE = {"user": "user", "assistant": "model"}
_MODE = {"auto": "AUTO", "any": "ANY", "tool": "ANY", "none": "NONE"}


def model_path(upstream_model: str, method: str) -> str:
    return f"/v1beta/models/{upstream_model.removeprefix('models/')}:{method}"


def _contents(messages: list[Message]) -> list[dict[str, Any]]:
    names = tool_names(messages)
    out: list[dict[str, Any]] = []
    for message in messages:
        parts = to_wire(message.parts, names)
        if parts:
            out.append({"role": _ROLE[message.role], "parts": parts})
    return out


def _thinking_config(thinking: Thinking) -> dict[str, Any]:
    if not thinking.enabled:
        return {"thinkingBudget": 0}
    cfg: dict[str, Any] = {"includeThoughts": thinking.include_thoughts}
    if thinking.budget_tokens is not None:
        cfg["thinkingBudget"] = thinking.budget_tokens
    elif thinking.effort is not None:
        cfg["thinkingBudget"] = _EFFORT_BUDGET.get(thinking.effort.lower(), -1)
    return cfg


def _generation_config(request: ChatRequest) -> dict[str, Any]:
    cfg: dict[str, Any] = {}
    for key, value in (("maxOutputTokens", request.max_tokens), ("temperature", request.temperature),
                       ("topP", request.top_p), ("topK", request.top_k), ("seed", request.seed),
                       ("presencePenalty", request.presence_penalty),
                       ("frequencyPenalty", request.frequency_penalty)):
        if value is not None:
            cfg[key] = value
    if request.stop:
        cfg["stopSequences"] = request.stop
    if request.n > 1:
        cfg["candidateCount"] = request.n
    if request.logprobs:
        cfg["responseLogprobs"] = True
        if request.top_logprobs is not None:
            cfg["logprobs"] = request.top_logprobs
    fmt = request.response_format
    if fmt is not None and fmt.type != "text":
        cfg["responseMimeType"] = "application/json"
        if fmt.type == "json_schema" and fmt.json_schema is not None:
            cfg["responseJsonSchema"] = fmt.json_schema
    if request.thinking is not None:
        cfg["thinkingConfig"] = _thinking_config(request.thinking)
    extra = request.extra.get("generationConfig")
    if isinstance(extra, dict):
        cfg.update({k: v for k, v in extra.items() if k not in cfg})
    return cfg


def build_body(request: ChatRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": _contents(request.messages)}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": p.text} for p in request.system]}
    if request.tools:
        decls = []
        for tool in request.tools:
            decl: dict[str, Any] = {"name": tool.name}
            if tool.description:
                decl["description"] = tool.description
            if tool.parameters:
                decl["parametersJsonSchema"] = tool.parameters
            decls.append(decl)
        body["tools"] = [{"functionDeclarations": decls}]
    choice = request.tool_choice
    if choice is not None and (request.tools or choice.mode == "none"):
        fcc: dict[str, Any] = {"mode": _MODE[choice.mode]}
        if choice.mode == "tool" and choice.name:
            fcc["allowedFunctionNames"] = [choice.name]
        body["toolConfig"] = {"functionCallingConfig": fcc}
    cfg = _generation_config(request)
    if cfg:
        body["generationConfig"] = cfg
    for key in ("safetySettings", "cachedContent", "labels"):
        if key in request.extra:
            body[key] = request.extra[key]
    return body


def decode_generate_response(body: bytes, request: ChatRequest) -> ChatResponse:
    try:
        resp = wire.RESPONSE_DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise UpstreamError(f"The upstream sent an unreadable generateContent answer: {exc}") from exc
    if resp.error is not None and not resp.candidates:
        raise UpstreamError("The upstream answered 200 with an error instead of content.")
    ids = CallIds(start=calls_in(request))
    candidates: list[Candidate] = []
    for cand in resp.candidates or []:
        parts = to_canonical(cand.content.parts, ids, None) if cand.content is not None else []
        called = any(isinstance(p, ToolCallPart) for p in parts)
        candidates.append(Candidate(index=cand.index, parts=parts,
                                    stop_reason=stop_reason(cand.finishReason or "STOP", called)))
    if not candidates:  # the prompt itself was blocked (promptFeedback.blockReason)
        candidates.append(Candidate(stop_reason="content_filter"))
    usage = usage_from_wire(resp.usageMetadata) if resp.usageMetadata is not None else Usage()
    return ChatResponse(id=resp.responseId or f"gen-{uuid.uuid4().hex[:24]}",
                        model=resp.modelVersion or request.model, created=int(time.time()),
                        candidates=candidates, usage=usage)


def decode_embeddings(body: bytes, request: EmbeddingRequest) -> EmbeddingResponse:
    try:
        resp = wire.EMBED_RESPONSE_DECODER.decode(body)
    except msgspec.DecodeError as exc:
        raise UpstreamError(f"The upstream sent an unreadable embedding answer: {exc}") from exc
    if resp.embeddings is not None:
        vectors = [e.values for e in resp.embeddings]
    elif resp.embedding is not None:
        vectors = [resp.embedding.values]
    else:
        raise UpstreamError("The upstream's embedding answer holds no embedding.")
    return EmbeddingResponse(model=request.model, vectors=vectors, usage=embedding_usage(resp, request))


def embedding_usage(resp: wire.EmbedContentResponse, request: EmbeddingRequest) -> Usage:
    """The Gemini API reports no usage for embeddings (newer versions may): count offline then."""
    if resp.usageMetadata is not None and resp.usageMetadata.promptTokenCount:
        return Usage(input_tokens=resp.usageMetadata.promptTokenCount)
    return Usage(input_tokens=sum(estimate_text_tokens(t) for t in request.inputs), estimated=True)


def embed_item(request: EmbeddingRequest, text: str, upstream_model: str) -> dict[str, Any]:
    item: dict[str, Any] = {"model": f"models/{upstream_model.removeprefix('models/')}",
                            "content": {"parts": [{"text": text}]}}
    if request.task_type:
        item["taskType"] = request.task_type
    if request.title and request.task_type == "RETRIEVAL_DOCUMENT":
        item["title"] = request.title
    if request.dimensions:
        item["outputDimensionality"] = request.dimensions
    return item


class V1betaAdapter:
    protocol = "v1beta"
    capabilities = frozenset({"generate", "embed"})  # text: an UpstreamAdapter
    version_prefix = "/v1beta"  # standard paths start with it; a base_url ending in it is not doubled

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-goog-api-key": api_key}

    def build_request(self, request: ChatRequest, upstream_model: str) -> UpstreamCall:
        method = "streamGenerateContent?alt=sse" if request.stream else "generateContent"
        path = model_path(upstream_model, method)
        return UpstreamCall(path=path, body=msgspec.json.encode(build_body(request)))

    def decode_response(self, body: bytes, request: ChatRequest) -> ChatResponse:
        return decode_generate_response(body, request)

    def stream_decoder(self, request: ChatRequest, limits: LimitsConfig) -> StreamDecoder:
        return GeminiStreamDecoder(request, max_event_bytes=limits.sse_event_bytes,
                                   max_element_bytes=limits.stream_element_bytes)

    def build_embedding_request(self, request: EmbeddingRequest, upstream_model: str) -> UpstreamCall:
        items = [embed_item(request, text, upstream_model) for text in request.inputs]
        if len(items) == 1:
            return UpstreamCall(path=model_path(upstream_model, "embedContent"),
                                body=msgspec.json.encode(items[0]))
        return UpstreamCall(path=model_path(upstream_model, "batchEmbedContents"),
                            body=msgspec.json.encode({"requests": items}))

    def decode_embedding_response(self, body: bytes, request: EmbeddingRequest) -> EmbeddingResponse:
        return decode_embeddings(body, request)

    def error_message(self, body: bytes) -> str:
        """``{"error": {"message"}}``, or that object inside a one-element array (stream form)."""
        data = body.strip()
        if data.startswith(b"[") and data.endswith(b"]"):
            data = data[1:-1].strip()
        try:
            envelope = wire.ERROR_DECODER.decode(data)
        except msgspec.DecodeError:
            return data[:500].decode("utf-8", "replace") if data else ""
        return envelope.error.message if envelope.error is not None else ""

    def context_too_long(self, status: int, body: bytes) -> bool:
        """Gemini's refusal of an input over the model's context: 400 ``INVALID_ARGUMENT`` "The
        input token count (N) exceeds the maximum number of tokens allowed (M)." (the model's
        fallbacks are then tried)."""
        message = self.error_message(body).lower() if status == 400 else ""
        return "input token count" in message and "exceeds the maximum number of tokens" in message
