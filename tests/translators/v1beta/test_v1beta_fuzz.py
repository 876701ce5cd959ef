"""Mutated wire samples: bad input of any shape ends in the family's own error, never a crash."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from gateway.relay.canonical import ChatRequest
from gateway.runtime.errors import InvalidRequest, UpstreamError
from gateway.settings.config import LimitsConfig
from translators.v1beta.client import decode_generate_request
from translators.v1beta.embeddings import V1betaEmbeddingFrontend
from translators.v1beta.frontend import V1betaFrontend
from translators.v1beta.upstream import V1betaAdapter

SAMPLES = Path(__file__).parent / "samples"
ADAPTER = V1betaAdapter()


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def decode(raw: bytes) -> ChatRequest:
    return decode_generate_request(raw, "gem", False)


def _mutations(obj: object, rng: random.Random, n: int) -> list[object]:
    """``n`` copies of ``obj`` with one node each replaced by a value of another kind."""
    paths: list[tuple[object, ...]] = []

    def walk(node: object, path: tuple[object, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(obj, ())
    weird: list[object] = [None, 0, -1, 2**70, 1.5, "", "x", True, [], {}, [1, "a"], {"a": None}]
    out = []
    for _ in range(n):
        copy = orjson.loads(orjson.dumps(obj))
        path = rng.choice(paths[1:])
        node = copy
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = rng.choice(weird)
        out.append(copy)
    return out


@pytest.mark.parametrize("name", ["request_full.json", "request_snake.json"])
def test_fuzzed_bodies_only_raise_invalid_request(name: str) -> None:
    """No malformed body yields anything but InvalidRequest (never a 500)."""
    rng = random.Random(name)
    for body in _mutations(orjson.loads(sample(name)), rng, 400):
        raw = json.dumps(body).encode()
        for call in (lambda r=raw: decode(r), lambda r=raw: V1betaFrontend().peek(r, "m", True)):
            try:
                call()
            except InvalidRequest:
                pass


def test_fuzzed_requests_translate_or_fail_cleanly() -> None:
    """What decodes also builds for a v1beta upstream (the other direction of the same wire)."""
    rng = random.Random("build")
    for body in _mutations(orjson.loads(sample("request_full.json")), rng, 300):
        try:
            req = decode(json.dumps(body).encode())
        except InvalidRequest:
            continue
        ADAPTER.build_request(req, "up")


@pytest.mark.parametrize("name", ["embed_request.json", "batch_embed_request.json"])
def test_fuzzed_embedding_bodies_only_raise_invalid_request(name: str) -> None:
    rng = random.Random(name)
    front = V1betaEmbeddingFrontend(batch=name.startswith("batch"))
    for body in _mutations(orjson.loads(sample(name)), rng, 300):
        try:
            req = front.decode_embedding_request(json.dumps(body).encode(), "sim-gemini-embed")
        except InvalidRequest:
            continue
        front.fast_embedding_request(json.dumps(body).encode(), req, "aliased")


@pytest.mark.parametrize("name", ["response_text.json", "response_thinking_tool.json",
                                  "response_blocked.json"])
def test_fuzzed_answers_only_raise_upstream_error(name: str) -> None:
    """A broken upstream answer is a 502, never a crash; the stream decoder just drops it."""
    rng = random.Random(name)
    req = ChatRequest(model="m", messages=[])
    for body in _mutations(orjson.loads(sample(name)), rng, 300):
        raw = json.dumps(body).encode()
        try:
            ADAPTER.decode_response(raw, req)
        except UpstreamError:
            pass
        decoder = ADAPTER.stream_decoder(req, LimitsConfig())
        decoder.feed(b"data: " + raw + b"\r\n\r\n")
        decoder.close()
