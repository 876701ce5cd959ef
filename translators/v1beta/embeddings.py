"""The client-facing embedding endpoints: ``embedContent`` and ``batchEmbedContents``.

Two stateless frontends, ``EMBED_ONE`` and ``EMBED_BATCH`` (``V1betaEmbeddingFrontend(batch=...)``).
The canonical request holds one ``taskType``/``title``/``outputDimensionality`` for all inputs: a
batch takes its first request's (the google-genai SDK sends the same on every request); the fast
path forwards each request's own.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api import EmbeddingFrontend, InvalidRequest, UpstreamCall, decode_body
from gateway.api.canonical import EmbeddingRequest, EmbeddingResponse, Usage
from gateway.api.relay import estimate_text_tokens
from translators.v1beta import wire
from translators.v1beta.client import model_from_path
from translators.v1beta.upstream import model_path

# Spec 4.8's task types, plus the other values the Gemini API documents.
TASK_TYPES = frozenset({"RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY", "CLASSIFICATION",
                        "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY",
                        "TASK_TYPE_UNSPECIFIED"})


def _validate(item: wire.EmbedContentRequest, model: str, where: str) -> str:
    """The text to embed of one request; InvalidRequest names the bad field."""
    prefix = f"{where}." if where else ""
    if item.content is None:
        raise InvalidRequest(f"`{prefix}content` is required.", param=f"{prefix}content")
    if not item.content.parts:
        raise InvalidRequest(f"`{prefix}content.parts` must not be empty.", param=f"{prefix}content.parts")
    texts: list[str] = []
    for j, part in enumerate(item.content.parts):
        if part.text is None:
            raise InvalidRequest(f"`{prefix}content.parts[{j}].text` is required: only text can be embedded.",
                                 param=f"{prefix}content.parts[{j}].text")
        texts.append(part.text)
    text = "\n".join(t for t in texts if t)
    if not text:
        raise InvalidRequest(f"`{prefix}content.parts` holds only empty text.",
                             param=f"{prefix}content.parts")
    if item.model is not None and item.model.removeprefix("models/") != model:
        raise InvalidRequest(f"`{prefix}model` ({item.model!r}) does not match the model in the path "
                             f"(`models/{model}`).", param=f"{prefix}model")
    if item.taskType is not None and item.taskType not in TASK_TYPES:
        allowed = ", ".join(sorted(TASK_TYPES - {"TASK_TYPE_UNSPECIFIED"}))
        raise InvalidRequest(f"`{prefix}taskType` must be one of {allowed}; got {item.taskType!r}.",
                             param=f"{prefix}taskType")
    if item.title is not None and item.taskType != "RETRIEVAL_DOCUMENT":
        raise InvalidRequest(f"`{prefix}title` is only allowed with `taskType` RETRIEVAL_DOCUMENT.",
                             param=f"{prefix}title")
    if item.outputDimensionality is not None and item.outputDimensionality < 1:
        raise InvalidRequest(f"`{prefix}outputDimensionality` must be a positive integer.",
                             param=f"{prefix}outputDimensionality")
    return text


def decode_embed_request(body: bytes, path_model: str | None, batch: bool) -> EmbeddingRequest:
    model = model_from_path(path_model)
    if batch:
        requests = decode_body(body, wire.BatchEmbedContentsRequest).requests
        if not requests:
            raise InvalidRequest("`requests` is required and must not be empty.", param="requests")
        items = requests
        inputs = [_validate(item, model, f"requests[{i}]") for i, item in enumerate(items)]
    else:
        items = [decode_body(body, wire.EmbedContentRequest)]
        inputs = [_validate(items[0], model, "")]
    first = items[0]
    return EmbeddingRequest(model=model, inputs=inputs, dimensions=first.outputDimensionality,
                            task_type=first.taskType, title=first.title)


class V1betaEmbeddingFrontend(EmbeddingFrontend):
    family = "v1beta"

    def __init__(self, *, batch: bool = False) -> None:
        self.batch = batch

    def decode_embedding_request(self, body: bytes, path_model: str | None) -> EmbeddingRequest:
        return decode_embed_request(body, path_model, self.batch)

    def encode_embedding_response(self, response: EmbeddingResponse, request: EmbeddingRequest) -> bytes:
        if self.batch:
            return msgspec.json.encode({"embeddings": [{"values": v} for v in response.vectors]})
        return msgspec.json.encode({"embedding": {"values": response.vectors[0] if response.vectors else []}})

    def fast_embedding_request(self, body: bytes, request: EmbeddingRequest,
                               upstream_model: str) -> UpstreamCall:
        upstream = upstream_model.removeprefix("models/")
        method = "batchEmbedContents" if self.batch else "embedContent"
        if upstream != request.model:
            body = _rename_models(body, upstream, self.batch)
        return UpstreamCall(path=model_path(upstream, method), body=body)

    def fast_embedding_response(self, body: bytes, request: EmbeddingRequest,
                                public_model: str) -> tuple[bytes, Usage | None]:
        try:
            meta = wire.EMBED_USAGE_DECODER.decode(body).usageMetadata
        except msgspec.DecodeError:
            meta = None
        if meta is not None and meta.promptTokenCount:
            return body, Usage(input_tokens=meta.promptTokenCount)
        # The Gemini API reports no usage for embeddings: an offline count, flagged as such.
        return body, Usage(input_tokens=sum(estimate_text_tokens(t) for t in request.inputs), estimated=True)


def _rename_models(body: bytes, upstream: str, batch: bool) -> bytes:
    """An aliased model: each request's own ``model`` must name the upstream's model too."""
    obj: Any = msgspec.json.decode(body)
    items = obj.get("requests", []) if batch else [obj]
    for item in items:
        if isinstance(item, dict) and (batch or "model" in item):
            item["model"] = f"models/{upstream}"
    return msgspec.json.encode(obj)


EMBED_ONE = V1betaEmbeddingFrontend(batch=False)
EMBED_BATCH = V1betaEmbeddingFrontend(batch=True)
