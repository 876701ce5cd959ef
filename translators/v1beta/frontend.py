"""The client-facing side of the family: ``generateContent`` and ``streamGenerateContent``.

Stateless: ``V1BETA`` serves every request. Whether a stream is SSE (``?alt=sse``) or one
incrementally sent JSON array is read from the call's query (``ClientCall``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api import (
    ClientCall,
    FastPathStream,
    Frontend,
    LimitsConfig,
    RequestView,
    StreamEncoder,
    UpstreamCall,
)
from gateway.api.canonical import ChatRequest, ChatResponse, Usage
from gateway.api.relay import body_token_bound, holds_sealed
from gateway.api.wire import decode
from translators.v1beta import wire
from translators.v1beta.client import check_generate_request, decode_generate_request, model_from_path
from translators.v1beta.fastpath import GeminiFastStream, restore_model_version, usage_of
from translators.v1beta.mapping import finish_reason, usage_to_wire
from translators.v1beta.parts import to_wire
from translators.v1beta.stream_encode import GeminiStreamEncoder
from translators.v1beta.upstream import build_body, model_path


def encode_response(response: ChatResponse, request: ChatRequest) -> bytes:
    thinking = request.thinking
    include = thinking is not None and thinking.enabled and thinking.include_thoughts
    candidates: list[dict[str, Any]] = []
    for cand in response.candidates:
        content: dict[str, Any] = {"role": "model"}
        parts = to_wire(cand.parts, include_thoughts=include, client=True)
        if parts:
            content["parts"] = parts
        candidates.append({"content": content, "finishReason": finish_reason(cand.stop_reason),
                           "index": cand.index})
    return msgspec.json.encode({"candidates": candidates, "usageMetadata": usage_to_wire(response.usage),
                         "modelVersion": response.model, "responseId": response.id})


_GENERATE = msgspec.json.Decoder(wire.GenerateContentRequest)


class V1betaView(RequestView):
    """What metering and routing need, plus the validated wire request (decoded once)."""

    raw: wire.GenerateContentRequest | None = None


def _sse(call: ClientCall) -> bool:
    return call.query.get("alt") == "sse"


class V1betaFrontend(Frontend):
    family = "v1beta"

    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> V1betaView:
        """Every path's first look: the request validated as the family defines it (decoded once,
        reused by ``decode_request``), without translating it."""
        model = model_from_path(path_model)
        req = decode(_GENERATE, body)
        check_generate_request(req)
        cfg = req.generationConfig
        max_tokens = cfg.maxOutputTokens if cfg is not None else None
        n = cfg.candidateCount if cfg is not None else None
        return V1betaView(model=model, stream=stream_hint, max_tokens=max_tokens,
                          input_tokens_estimate=body_token_bound(body), stream_usage=True,
                          candidates=n or 1, raw=req)

    def decode_request(self, call: ClientCall) -> ChatRequest:
        view = call.view
        return decode_generate_request(call.body, call.path_model, call.stream_hint,
                                       view.raw if isinstance(view, V1betaView) else None)

    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes:
        return encode_response(response, request)

    def stream_encoder(self, request: ChatRequest, call: ClientCall) -> StreamEncoder:
        encoder = GeminiStreamEncoder(request, sse=_sse(call))
        if isinstance(call.fast_stream, GeminiFastStream):
            # Asked for after a fast-path stream broke, to write the in-band error: it continues
            # the upstream's bytes already relayed.
            encoder.error_prefix = call.fast_stream.array_error_prefix()
        return encoder

    # --- same-format fast path --------------------------------------------------------------

    def fast_request(self, call: ClientCall) -> UpstreamCall:
        upstream_model = call.upstream_model or call.view.model
        body = call.body
        if holds_sealed(body):  # another format's reasoning state: see gateway.relay.reasoning_state
            body = msgspec.json.encode(build_body(call.canonical()))
        if not call.view.stream:
            return UpstreamCall(path=model_path(upstream_model, "generateContent"), body=body)
        method = "streamGenerateContent?alt=sse" if _sse(call) else "streamGenerateContent"
        return UpstreamCall(path=model_path(upstream_model, method), body=body)

    def fast_usage(self, body: bytes) -> Usage | None:
        return usage_of(body)

    def fast_stream(self, call: ClientCall, limits: LimitsConfig) -> FastPathStream:
        upstream = (call.upstream_model or "").removeprefix("models/")
        public = call.public_model
        rename = (upstream, public) if upstream and upstream != public else None
        return GeminiFastStream(rename, sse=_sse(call), max_event_bytes=limits.sse_event_bytes,
                                max_element_bytes=limits.stream_element_bytes)

    def fast_response(self, body: bytes, call: ClientCall, public_model: str) -> bytes:
        upstream = call.upstream_model
        if upstream is not None and upstream.removeprefix("models/") != public_model:
            return restore_model_version(body, upstream.removeprefix("models/"), public_model)
        return body


V1BETA = V1betaFrontend()
