"""``POST /api/embed`` and the older ``POST /api/embeddings`` (``EmbeddingFrontend``).

``/api/embed`` takes one string or a list and answers ``{"model", "embeddings": [[...]],
"prompt_eval_count"}``; ``/api/embeddings`` takes one ``prompt`` and answers ``{"embedding": [...]}``.
An Ollama upstream is always asked through ``/api/embed`` (the older endpoint is deprecated).
"""

from __future__ import annotations

from gateway.api import EmbeddingFrontend, InvalidRequest, UpstreamCall
from gateway.api.canonical import EmbeddingRequest, EmbeddingResponse, Usage
from gateway.api.wire import decode

from gateway_ollama import wire
from gateway_ollama.fastpath import forward_body, read_usage, with_model
from gateway_ollama.frontend import FAMILY
from gateway_ollama.upstream import EMBED_PATH, OllamaAdapter

_ADAPTER = OllamaAdapter()


def _model(model: str) -> str:
    if not model:
        raise InvalidRequest("`model` is required.", param="model")
    return model


class EmbedFrontend(EmbeddingFrontend):
    family = FAMILY

    def decode_embedding_request(self, body: bytes, path_model: str | None) -> EmbeddingRequest:
        embed = decode(wire.embed_body_decoder, body)
        inputs = [embed.input] if isinstance(embed.input, str) else list(embed.input)
        if not inputs or not all(inputs):
            raise InvalidRequest("`input` must be a non-empty string or a list of non-empty strings.",
                                 param="input")
        if embed.dimensions is not None and embed.dimensions <= 0:
            raise InvalidRequest("`dimensions` must be a positive integer.", param="dimensions")
        return EmbeddingRequest(model=_model(embed.model), inputs=inputs, dimensions=embed.dimensions)

    def encode_embedding_response(self, response: EmbeddingResponse, request: EmbeddingRequest) -> bytes:
        answer = wire.EmbedAnswer(model=response.model, embeddings=response.vectors,
                                  prompt_eval_count=response.usage.input_tokens or None)
        return wire.encoder.encode(answer)

    def fast_embedding_request(self, body: bytes, request: EmbeddingRequest,
                               upstream_model: str) -> UpstreamCall:
        return UpstreamCall(path=EMBED_PATH, body=forward_body(body, request.model, upstream_model))

    def fast_embedding_response(self, body: bytes, request: EmbeddingRequest,
                                public_model: str) -> tuple[bytes, Usage | None]:
        return with_model(body, public_model), read_usage(body)


class LegacyEmbeddingsFrontend(EmbeddingFrontend):
    family = FAMILY

    def decode_embedding_request(self, body: bytes, path_model: str | None) -> EmbeddingRequest:
        legacy = decode(wire.embeddings_body_decoder, body)
        if not legacy.prompt:
            raise InvalidRequest("`prompt` is required.", param="prompt")
        return EmbeddingRequest(model=_model(legacy.model), inputs=[legacy.prompt])

    def encode_embedding_response(self, response: EmbeddingResponse, request: EmbeddingRequest) -> bytes:
        vector = response.vectors[0] if response.vectors else []
        return wire.encoder.encode(wire.EmbeddingsOut(embedding=vector))

    def fast_embedding_request(self, body: bytes, request: EmbeddingRequest,
                               upstream_model: str) -> UpstreamCall:
        return _ADAPTER.build_embedding_request(request, upstream_model)

    def fast_embedding_response(self, body: bytes, request: EmbeddingRequest,
                                public_model: str) -> tuple[bytes, Usage | None]:
        decoded = _ADAPTER.decode_embedding_response(body, request)
        usage = decoded.usage if decoded.usage.input_tokens else None
        return self.encode_embedding_response(decoded, request), usage
