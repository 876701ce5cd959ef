"""``/v1/embeddings``: decode, validation, float and base64 encoding, the fast path."""

from __future__ import annotations

import base64
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.relay.canonical import EmbeddingResponse, Usage
from gateway.runtime.errors import InvalidRequest
from translators.chat.embeddings import (
    ChatEmbeddingFrontend,
    ChatEmbeddingRequest,
    base64_to_floats,
    floats_to_base64,
)

SAMPLES = Path(__file__).parent / "samples"


def body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "input": "hello", **fields})


def decode(raw: bytes) -> ChatEmbeddingRequest:
    return ChatEmbeddingFrontend().decode_embedding_request(raw, None)


def test_decode_sample() -> None:
    req = decode((SAMPLES / "embeddings_request.json").read_bytes())
    assert req.model == "text-embedding-3-small"
    assert req.inputs == ["The food was delicious", "and the waiter..."]
    assert req.encoding_format == "base64" and req.dimensions == 4 and req.user == "user-1"
    assert req.token_inputs is None


def test_decode_input_forms() -> None:
    assert decode(body()).inputs == ["hello"] and decode(body()).encoding_format == "float"
    tokens = decode(body(input=[1, 2, 3]))
    assert tokens.inputs == [] and tokens.token_inputs == [[1, 2, 3]]
    assert decode(body(input=[[1, 2], [3]])).token_inputs == [[1, 2], [3]]


@pytest.mark.parametrize(("raw", "param"), [
    (orjson.dumps({"input": "x"}), "model"),
    (orjson.dumps({"model": "m"}), "input"),
    (body(input=""), "input"),
    (body(input=[]), "input"),
    (body(input=["a", ""]), "input[1]"),
    (body(input=["a", 1]), "input"),
    (body(input=[[1], []]), "input"),
    (body(input=[True]), "input"),
    (body(input={"text": "x"}), "input"),
    (body(input=["x"] * 2049), "input"),
    (body(encoding_format="int8"), "encoding_format"),
    (body(dimensions=0), "dimensions"),
    (body(dimensions="big"), "dimensions"),
    (body(dimensions=True), "dimensions"),
    (b"[]", None),
    (b"{oops", None),
])
def test_validation(raw: bytes, param: str | None) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode(raw)
    assert info.value.param == param


def test_base64_is_little_endian_float32() -> None:
    vector = [0.5, -0.5, 1.0, 0.0]
    encoded = floats_to_base64(vector)
    assert encoded == "AAAAPwAAAL8AAIA/AAAAAA=="
    assert struct.unpack("<4f", base64.b64decode(encoded)) == tuple(vector)
    assert base64_to_floats(encoded) == vector


@pytest.mark.parametrize("fmt", ["float", "base64"])
def test_encode_response(fmt: str) -> None:
    req = decode(body(input=["a", "b"], encoding_format=fmt))
    response = EmbeddingResponse(model="m", vectors=[[0.25, 0.5], [1.0, -1.0]], usage=Usage(input_tokens=6))
    out = orjson.loads(ChatEmbeddingFrontend().encode_embedding_response(response, req))
    assert out["object"] == "list" and out["model"] == "m"
    assert out["usage"] == {"prompt_tokens": 6, "total_tokens": 6}
    assert [d["object"] for d in out["data"]] == ["embedding", "embedding"]
    assert [d["index"] for d in out["data"]] == [0, 1]
    vectors = [d["embedding"] if fmt == "float" else base64_to_floats(d["embedding"]) for d in out["data"]]
    assert vectors == [[0.25, 0.5], [1.0, -1.0]]


def test_dimensions_shorten_a_longer_vector_to_unit_length() -> None:
    req = decode(body(dimensions=2))
    response = EmbeddingResponse(model="m", vectors=[[3.0, 4.0, 12.0]])
    out = orjson.loads(ChatEmbeddingFrontend().encode_embedding_response(response, req))
    assert out["data"][0]["embedding"] == pytest.approx([0.6, 0.8])


def test_fast_path_forwards_bytes_and_reads_usage() -> None:
    frontend = ChatEmbeddingFrontend()
    raw = body(x_vendor=True)
    req = frontend.decode_embedding_request(raw, None)
    call = frontend.fast_embedding_request(raw, req, "m")
    assert call.path == "/v1/embeddings" and call.body is raw
    answer = (SAMPLES / "embeddings_response_float.json").read_bytes()
    out, usage = frontend.fast_embedding_response(answer, req, "m")
    assert out is answer and usage == Usage(input_tokens=8)


def test_fast_path_alias() -> None:
    frontend = ChatEmbeddingFrontend()
    raw = body(dimensions=4)
    req = frontend.decode_embedding_request(raw, None)
    sent = orjson.loads(frontend.fast_embedding_request(raw, req, "text-embedding-3-small").body)
    assert sent == {"model": "text-embedding-3-small", "input": "hello", "dimensions": 4}
    answer = (SAMPLES / "embeddings_response_float.json").read_bytes()
    out, usage = frontend.fast_embedding_response(answer, req, "m")
    assert orjson.loads(out)["model"] == "m" and orjson.loads(out)["data"] == orjson.loads(answer)["data"]
    assert usage == Usage(input_tokens=8)
