"""embedContent / batchEmbedContents on the client side: validation, encoding, fast path."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.relay.canonical import EmbeddingRequest, EmbeddingResponse, Usage
from gateway.relay.tokens import estimate_text_tokens
from gateway.runtime.errors import InvalidRequest
from translators.v1beta.embeddings import V1betaEmbeddingFrontend

SAMPLES = Path(__file__).parent / "samples"
SINGLE = V1betaEmbeddingFrontend(batch=False)
BATCH = V1betaEmbeddingFrontend(batch=True)


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def test_decode_single() -> None:
    req = SINGLE.decode_embedding_request(sample("embed_request.json"), "sim-gemini-embed")
    assert req == EmbeddingRequest(
        model="sim-gemini-embed",
        inputs=["Hello\nworld"],
        dimensions=256,
        task_type="RETRIEVAL_DOCUMENT",
        title="Greeting",
    )
    snake = SINGLE.decode_embedding_request(
        b'{"content": {"parts": [{"text": "x"}]}, "task_type": "CLUSTERING", "output_dimensionality": 8}', "m"
    )
    assert (snake.task_type, snake.dimensions) == ("CLUSTERING", 8)


def test_decode_batch() -> None:
    req = BATCH.decode_embedding_request(sample("batch_embed_request.json"), "models/sim-gemini-embed")
    assert req == EmbeddingRequest(
        model="sim-gemini-embed", inputs=["first", "second"], dimensions=64, task_type="SEMANTIC_SIMILARITY"
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "content"),
        ({"content": {"parts": []}}, "content.parts"),
        ({"content": {"parts": [{"inlineData": {"data": "x"}}]}}, "content.parts[0].text"),
        ({"content": {"parts": [{"text": ""}]}}, "content.parts"),
        ({"content": {"parts": [{"text": "x"}]}, "taskType": "SUMMARISE"}, "taskType"),
        ({"content": {"parts": [{"text": "x"}]}, "title": "T"}, "title"),
        ({"content": {"parts": [{"text": "x"}]}, "taskType": "RETRIEVAL_QUERY", "title": "T"}, "title"),
        ({"content": {"parts": [{"text": "x"}]}, "outputDimensionality": 0}, "outputDimensionality"),
        ({"content": {"parts": [{"text": "x"}]}, "outputDimensionality": "big"}, "outputDimensionality"),
        ({"content": {"parts": [{"text": "x"}]}, "model": "models/other"}, "model"),
    ],
)
def test_single_validation(body: object, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        SINGLE.decode_embedding_request(orjson.dumps(body), "m")
    assert info.value.param == param, info.value.message


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "requests"),
        ({"requests": []}, "requests"),
        (
            {"requests": [{"content": {"parts": [{"text": "x"}]}}, {"model": "models/m"}]},
            "requests[1].content",
        ),
        ({"requests": [{"model": "models/x", "content": {"parts": [{"text": "x"}]}}]}, "requests[0].model"),
        (
            {
                "requests": [
                    {"content": {"parts": [{"text": "x"}]}, "taskType": "CLASSIFICATION", "title": "t"}
                ]
            },
            "requests[0].title",
        ),
    ],
)
def test_batch_validation(body: object, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        BATCH.decode_embedding_request(orjson.dumps(body), "m")
    assert info.value.param == param, info.value.message


def test_encode() -> None:
    response = EmbeddingResponse(model="m", vectors=[[0.5, 0.25], [1.0, 0.0]])
    req = EmbeddingRequest(model="m", inputs=["a", "b"])
    assert orjson.loads(BATCH.encode_embedding_response(response, req)) == {
        "embeddings": [{"values": [0.5, 0.25]}, {"values": [1.0, 0.0]}]
    }
    one = EmbeddingResponse(model="m", vectors=[[0.5]])
    assert orjson.loads(SINGLE.encode_embedding_response(one, req)) == {"embedding": {"values": [0.5]}}


def test_fast_path() -> None:
    body = sample("batch_embed_request.json")
    req = BATCH.decode_embedding_request(body, "sim-gemini-embed")
    call = BATCH.fast_embedding_request(body, req, "sim-gemini-embed")
    assert call.body is body and call.path == "/v1beta/models/sim-gemini-embed:batchEmbedContents"
    aliased = BATCH.fast_embedding_request(body, req, "text-embedding-004")
    assert aliased.path == "/v1beta/models/text-embedding-004:batchEmbedContents"
    assert [r["model"] for r in orjson.loads(aliased.body)["requests"]] == ["models/text-embedding-004"] * 2
    single = sample("embed_request.json")
    sreq = SINGLE.decode_embedding_request(single, "sim-gemini-embed")
    assert orjson.loads(SINGLE.fast_embedding_request(single, sreq, "up").body)["model"] == "models/up"

    out, usage = BATCH.fast_embedding_response(sample("batch_embed_response.json"), req, "sim-gemini-embed")
    assert out == sample("batch_embed_response.json")
    assert usage == Usage(
        input_tokens=estimate_text_tokens("first") + estimate_text_tokens("second"), estimated=True
    )
    _, reported = BATCH.fast_embedding_response(
        b'{"embeddings": [], "usageMetadata": {"promptTokenCount": 5}}', req, "x"
    )
    assert reported == Usage(input_tokens=5)
