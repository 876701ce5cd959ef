"""``POST /v1/embeddings`` (spec 4.5): the chat family's EmbeddingFrontend.

``encoding_format`` is ``float`` (default) or ``base64`` (little-endian float32 bytes, base64 text,
what the openai SDK asks for by default). Token-id inputs (an array of ids, or of id arrays) are
kept in ``ChatEmbeddingRequest.token_inputs``: only an OpenAI-compatible upstream can embed them,
and it gets the client's bytes untouched on the fast path; ``inputs`` is then empty.
"""

from __future__ import annotations

import array
import base64
import math
import sys
from typing import Any

import orjson

from gateway.api import EmbeddingFrontend, InvalidRequest, UpstreamCall, field_error
from gateway.api.canonical import EmbeddingRequest, EmbeddingResponse, Usage
from gateway.api.wire import decode
from translators.chat.fastpath import read_usage, replace_model
from translators.chat.validation import require
from translators.chat.wire import embeddings_request_decoder
from translators.chat.wire_out import OutEmbedding, OutEmbeddingList, OutEmbeddingUsage, encoder

MAX_INPUTS = 2048
ENCODING_FORMATS = ("float", "base64")


class ChatEmbeddingRequest(EmbeddingRequest):
    """The canonical embedding request plus what only this family's wire has."""

    encoding_format: str = "float"
    # Per call, set on the fast path: the id a same-format upstream was asked for (when it is not
    # the public one, the answer gets the public id back). Never on the wire.
    forwarded_as: str | None = None


def decode_embeddings_request(body: bytes) -> ChatEmbeddingRequest:
    wire = decode(embeddings_request_decoder, body)
    require(bool(wire.model), "You must provide a model parameter: `model` is empty.", "model")
    inputs, tokens = _inputs(wire.input)
    fmt = wire.encoding_format if wire.encoding_format is not None else "float"
    require(fmt in ENCODING_FORMATS, f"Invalid value for `encoding_format`: {fmt!r} (expected `float` or "
            "`base64`).", "encoding_format")
    require(wire.dimensions is None or wire.dimensions >= 1,
            "Invalid value for `dimensions`: expected a positive integer.", "dimensions")
    return ChatEmbeddingRequest(model=wire.model, inputs=inputs, dimensions=wire.dimensions, user=wire.user,
                                encoding_format=fmt, token_inputs=tokens)


def _inputs(value: Any) -> tuple[list[str], list[list[int]] | None]:
    if isinstance(value, str):
        require(bool(value), "Invalid value for `input`: it must not be an empty string.", "input")
        return [value], None
    require(isinstance(value, list) and bool(value),
            "Invalid value for `input`: expected a non-empty string, array of strings or array of token "
            "arrays.", "input")
    require(len(value) <= MAX_INPUTS, f"`input` holds {len(value)} items; at most {MAX_INPUTS} are allowed.",
            "input")
    if all(isinstance(v, str) for v in value):
        for i, text in enumerate(value):
            require(bool(text), f"Invalid value for `input[{i}]`: it must not be an empty string.",
                    f"input[{i}]")
        return list(value), None
    if all(_is_token(v) for v in value):
        return [], [list(value)]
    if all(isinstance(v, list) and v and all(_is_token(t) for t in v) for v in value):
        return [], [list(v) for v in value]
    raise InvalidRequest("Invalid value for `input`: expected a string, an array of strings, an array of "
                         "token ids or an array of token-id arrays (not a mix).", param="input")


def _is_token(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def floats_to_base64(vector: list[float]) -> str:
    packed = array.array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def base64_to_floats(text: str) -> list[float]:
    packed = array.array("f")
    packed.frombytes(base64.b64decode(text))
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tolist()


def _shorten(vector: list[float], dimensions: int | None) -> list[float]:
    """OpenAI's ``dimensions``: the first N values, scaled back to unit length. Only applied when an
    upstream sent more than asked (one of another protocol may not know the parameter)."""
    if dimensions is None or len(vector) <= dimensions:
        return vector
    head = vector[:dimensions]
    norm = math.sqrt(sum(v * v for v in head)) or 1.0
    return [v / norm for v in head]


def encode_embeddings_response(response: EmbeddingResponse, request: EmbeddingRequest) -> bytes:
    as_base64 = getattr(request, "encoding_format", "float") == "base64"
    data = []
    for i, vector in enumerate(response.vectors):
        vector = _shorten(vector, request.dimensions)
        data.append(OutEmbedding(index=i, embedding=floats_to_base64(vector) if as_base64 else vector))
    tokens = response.usage.input_tokens
    out = OutEmbeddingList(data=data, model=response.model or request.model,
                           usage=OutEmbeddingUsage(prompt_tokens=tokens, total_tokens=tokens))
    return encoder.encode(out)


class ChatEmbeddingFrontend(EmbeddingFrontend):
    """Stateless: what one call's fast path must remember rides on its ``ChatEmbeddingRequest``."""

    family = "chat"
    upstream_path = "/v1/embeddings"

    def decode_embedding_request(self, body: bytes, path_model: str | None) -> ChatEmbeddingRequest:
        return decode_embeddings_request(body)

    def encode_embedding_response(self, response: EmbeddingResponse, request: EmbeddingRequest) -> bytes:
        return encode_embeddings_response(response, request)

    def fast_embedding_request(self, body: bytes, request: EmbeddingRequest,
                               upstream_model: str) -> UpstreamCall:
        if isinstance(request, ChatEmbeddingRequest):
            request.forwarded_as = upstream_model
        if upstream_model != request.model:
            try:
                obj = orjson.loads(body)
            except orjson.JSONDecodeError as exc:  # decoded once, but unknown fields were only skipped
                raise field_error(exc) from exc
            obj["model"] = upstream_model
            body = orjson.dumps(obj)
        return UpstreamCall(path=self.upstream_path, body=body)

    def fast_embedding_response(self, body: bytes, request: EmbeddingRequest,
                                public_model: str) -> tuple[bytes, Usage | None]:
        usage = read_usage(body)
        forwarded = request.forwarded_as if isinstance(request, ChatEmbeddingRequest) else None
        if forwarded is not None and forwarded != request.model:
            body = replace_model(body, public_model, count=1)
        return body, usage


EMBEDDINGS = ChatEmbeddingFrontend()
