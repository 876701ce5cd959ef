"""Same-format fast path: bytes through unchanged, usage read from answers and from each chunk."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

from gateway.relay.canonical import (
    Candidate,
    ChatRequest,
    ChatResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from gateway.relay.canonical import Thinking as ThinkingCfg
from gateway.settings.config import LimitsConfig
from tests.relay.calls import client_call, forwarded
from translators.v1beta.frontend import V1betaFrontend
from translators.v1beta.stream_decode import GeminiStreamDecoder

SAMPLES = Path(__file__).parent / "samples"
BODY = b'{"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 5}}'


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def chunkings(data: bytes, seed: int = 11) -> list[list[bytes]]:
    """Whole, byte by byte, every two-way split, and random cuts."""
    out = [[data], [data[i : i + 1] for i in range(len(data))]]
    out += [[data[:i], data[i:]] for i in range(1, len(data))]
    rng = random.Random(seed)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(data)), 6))
        out.append([data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)])
    return out


def test_fast_request_keeps_bytes_and_framing() -> None:
    front = V1betaFrontend()
    call = front.fast_request(forwarded(client_call(front, BODY, path_model="pub", query="alt=sse"), "pub"))
    assert call.body is BODY and call.path == "/v1beta/models/pub:generateContent"
    streamed = client_call(front, BODY, path_model="pub", stream_hint=True, query="alt=sse")
    assert (
        front.fast_request(forwarded(streamed, "models/real-model")).path
        == "/v1beta/models/real-model:streamGenerateContent?alt=sse"
    )
    array = forwarded(client_call(front, BODY, path_model="pub", stream_hint=True), "pub")
    assert front.fast_request(array).path == "/v1beta/models/pub:streamGenerateContent"


def test_fast_usage_and_response() -> None:
    front = V1betaFrontend()
    body = sample("response_thinking_tool.json")
    assert front.fast_usage(body) == Usage(
        input_tokens=100, output_tokens=70, cache_read_tokens=40, reasoning_tokens=50
    )
    assert front.fast_usage(b'{"candidates": []}') is None
    assert front.fast_usage(b"garbage") is None
    call = forwarded(client_call(front, BODY, path_model="pub"), "pub")
    front.fast_request(call)
    assert front.fast_response(body, call, "pub") is body  # not aliased: untouched


def test_fast_response_restores_aliased_model() -> None:
    front = V1betaFrontend()
    call = forwarded(client_call(front, BODY, path_model="my-alias"), "gemini-2.5-pro")
    front.fast_request(call)
    out = front.fast_response(sample("response_thinking_tool.json"), call, "my-alias")
    assert orjson.loads(out)["modelVersion"] == "my-alias"


def run_fast(chunks: list[bytes], sse: bool) -> tuple[bytes, Usage | None, bool]:
    front = V1betaFrontend()
    stream = front.fast_stream(client_call(front, BODY, path_model="pub", stream_hint=True,
                                           query="alt=sse" if sse else ""), LimitsConfig())
    out = b"".join(stream.feed(c) for c in chunks) + stream.close()
    return out, stream.usage, stream.complete


def test_fast_stream_sse_any_chunking() -> None:
    data = sample("stream_thinking.sse")
    for chunks in chunkings(data):
        out, usage, complete = run_fast(chunks, sse=True)
        assert out == data
        assert usage == Usage(input_tokens=9, output_tokens=7, reasoning_tokens=4)
        assert complete


def test_fast_stream_array_any_chunking() -> None:
    data = sample("stream_tools.json")
    for chunks in chunkings(data):
        out, usage, complete = run_fast(chunks, sse=False)
        assert out == data and usage == Usage(input_tokens=30, output_tokens=12) and complete


def test_fast_stream_cut_keeps_last_usage() -> None:
    data = sample("stream_thinking.sse")
    cut = data[: data.rindex(b"data: ")]
    out, usage, complete = run_fast([cut], sse=True)
    assert out == cut and not complete
    assert usage == Usage(input_tokens=9, output_tokens=6, reasoning_tokens=4)


def test_fast_stream_error_continues_the_array() -> None:
    """After a broken fast-path array stream, the in-band error keeps the client's JSON valid."""
    data = sample("stream_tools.json")
    head = data[: data.index(b"\n,\n") + 3]
    front = V1betaFrontend()
    call = client_call(front, BODY, path_model="pub", stream_hint=True)
    stream = call.fast_stream = front.fast_stream(call, LimitsConfig())
    relayed = stream.feed(head)
    encoder = front.stream_encoder(ChatRequest(model="pub", messages=[]), call)
    tail = encoder.error(502, "upstream_error", "cut")
    parsed = orjson.loads(relayed + tail)
    assert parsed[-1]["error"]["code"] == 502


def test_relay_fallback_decodes_array_form() -> None:
    """The relay estimates usage of a relayed stream with the adapter's decoder: both framings."""
    decoder = GeminiStreamDecoder(ChatRequest(model="pub", messages=[]))
    events = decoder.feed(sample("stream_tools.json")) + decoder.close()
    assert decoder.complete and events[-1].usage == Usage(input_tokens=30, output_tokens=12)


def test_encode_whole_response() -> None:
    front = V1betaFrontend()
    response = ChatResponse(
        id="msg_9",
        model="pub",
        created=0,
        candidates=[
            Candidate(
                parts=[
                    ThinkingPart(text="why", signature="s1"),
                    TextPart(text="Because."),
                    ToolCallPart(id="toolu_2", name="f", arguments='{"x": [1]}'),
                ],
                stop_reason="tool_use",
            ),
            Candidate(index=1, parts=[TextPart(text="Alt")], stop_reason="max_tokens"),
        ],
        usage=Usage(input_tokens=20, output_tokens=9, reasoning_tokens=2),
    )
    shown = orjson.loads(
        front.encode_response(
            response, ChatRequest(model="pub", messages=[], thinking=ThinkingCfg(include_thoughts=True))
        )
    )
    assert shown == {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "why", "thought": True, "thoughtSignature": "s1"},
                        {"text": "Because."},
                        {"functionCall": {"id": "toolu_2", "name": "f", "args": {"x": [1]}}},
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            },
            {
                "content": {"role": "model", "parts": [{"text": "Alt"}]},
                "finishReason": "MAX_TOKENS",
                "index": 1,
            },
        ],
        "usageMetadata": {
            "promptTokenCount": 20,
            "candidatesTokenCount": 7,
            "totalTokenCount": 29,
            "thoughtsTokenCount": 2,
        },
        "modelVersion": "pub",
        "responseId": "msg_9",
    }
    hidden = orjson.loads(front.encode_response(response, ChatRequest(model="pub", messages=[])))
    assert hidden["candidates"][0]["content"]["parts"][0] == {"text": "Because.", "thoughtSignature": "s1"}
