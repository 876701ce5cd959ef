"""Streams both ways: Gemini upstream streams -> canonical events (any chunking, either framing),
and canonical events -> the client's SSE or JSON-array stream."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from gateway.relay.canonical import (
    ChatRequest,
    Finish,
    Message,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    Thinking,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallPart,
    Usage,
    UsageReport,
)
from translators.v1beta.framing import ArraySplitter
from translators.v1beta.stream_decode import GeminiStreamDecoder
from translators.v1beta.stream_encode import GeminiStreamEncoder

SAMPLES = Path(__file__).parent / "samples"
REQUEST = ChatRequest(model="pub", messages=[Message(role="user", parts=[TextPart(text="hi")])])


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def decode(chunks: list[bytes], request: ChatRequest = REQUEST) -> tuple[list[StreamEvent], bool]:
    decoder = GeminiStreamDecoder(request)
    events: list[StreamEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    for event in events:
        if isinstance(event, StreamStart):
            event.created = 0
    return events, decoder.complete


def chunkings(data: bytes, seed: int = 7) -> list[list[bytes]]:
    """Whole, byte by byte, every two-way split, and random cuts."""
    out = [[data], [data[i : i + 1] for i in range(len(data))]]
    out += [[data[:i], data[i:]] for i in range(1, len(data))]
    rng = random.Random(seed)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(data)), 6))
        out.append([data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)])
    return out


THINKING_EVENTS: list[StreamEvent] = [
    StreamStart(id="r1", model="gemini-2.5-flash", usage=Usage(input_tokens=9)),
    PartStart(index=0, kind="thinking"),
    ThinkingDelta(index=0, text="Thinking about"),
    ThinkingDelta(index=0, text=" it."),
    PartStop(index=0),
    PartStart(index=1, kind="thinking"),  # the signature that came on the first text part
    ThinkingDelta(index=1, signature="c2ln", origin="v1beta"),
    PartStop(index=1),
    PartStart(index=2, kind="text"),
    TextDelta(index=2, text="Hello"),
    TextDelta(index=2, text=" world"),
    TextDelta(index=2, text="!"),
    PartStop(index=2),
    Finish(stop_reason="end_turn"),
    UsageReport(usage=Usage(input_tokens=9, output_tokens=7, reasoning_tokens=4)),
]


def test_sse_thinking_stream_any_chunking() -> None:
    data = sample("stream_thinking.sse")
    for chunks in chunkings(data):
        events, complete = decode(chunks)
        assert events == THINKING_EVENTS
        assert complete


def test_sse_with_lf_line_ends() -> None:
    data = sample("stream_thinking.sse").replace(b"\r\n", b"\n")
    events, complete = decode([data])
    assert events == THINKING_EVENTS and complete


TOOL_REQUEST = ChatRequest(
    model="pub",
    messages=[
        Message(role="assistant", parts=[ToolCallPart(id="a", name="x"), ToolCallPart(id="b", name="y")])
    ],
)
TOOL_EVENTS: list[StreamEvent] = [
    StreamStart(id="r2", model="gemini-2.5-flash", usage=Usage(input_tokens=30)),
    PartStart(index=0, kind="text"),
    TextDelta(index=0, text='Checking {"braces"} and [brackets] \\" escaped'),
    PartStop(index=0),
    # two calls in the request history: numbering continues at 2
    PartStart(index=1, kind="tool_call", tool_call_id="call_get_weather_2", tool_name="get_weather"),
    ToolArgsDelta(index=1, partial_json='{"city":"Paris"}'),
    PartStop(index=1),
    PartStart(index=2, kind="tool_call", tool_call_id="wire-id-7", tool_name="get_time"),
    ToolArgsDelta(index=2, partial_json="{}"),
    PartStop(index=2),
    Finish(stop_reason="tool_use"),
    UsageReport(usage=Usage(input_tokens=30, output_tokens=12)),
]


def test_json_array_stream_any_chunking() -> None:
    data = sample("stream_tools.json")
    for chunks in chunkings(data):
        events, complete = decode(chunks, TOOL_REQUEST)
        assert events == TOOL_EVENTS
        assert complete


def test_array_splitter_strings_and_escapes() -> None:
    objects = [{"a": 'x"}]{[\\', "b": [1, {"c": "\\\\"}]}, {"d": "]"}]
    data = b"[" + b",\r\n".join(orjson.dumps(o) for o in objects) + b"]"
    for chunks in chunkings(data):
        splitter = ArraySplitter()
        got = [orjson.loads(o) for c in chunks for o in splitter.feed(c)]
        assert got == objects and splitter.ended


def test_cut_stream_is_incomplete() -> None:
    data = sample("stream_thinking.sse")
    cut = data[: data.index(b'"finishReason"') - 40]
    events, complete = decode([cut])
    assert not complete
    assert not any(isinstance(e, Finish) for e in events)
    assert isinstance(events[-1], UsageReport) and isinstance(events[-2], PartStop)  # open part closed


def test_in_band_error_is_incomplete() -> None:
    events, complete = decode(
        [b'data: {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}\r\n\r\n']
    )
    assert events == [] and not complete


def test_blocked_prompt_stream() -> None:
    chunk = (b'data: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, '
             b'"usageMetadata": {"promptTokenCount": 4}}\n\n')
    events, complete = decode([chunk])
    assert complete and Finish(stop_reason="content_filter") in events


def test_multiple_candidates_and_max_tokens() -> None:
    chunk = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "a"}]}, "index": 0},
            {
                "content": {"role": "model", "parts": [{"text": "b"}]},
                "index": 1,
                "finishReason": "MAX_TOKENS",
            },
        ]
    }
    last = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "c"}]}, "index": 0, "finishReason": "SAFETY"}
        ]
    }
    data = b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in (chunk, last))
    events, _complete = decode([data])
    finishes = [e for e in events if isinstance(e, Finish)]
    assert finishes == [Finish(stop_reason="max_tokens", candidate=1), Finish(stop_reason="content_filter")]
    assert [e.text for e in events if isinstance(e, TextDelta) and e.candidate == 0] == ["a", "c"]


# --- encoding ------------------------------------------------------------------------------------


def encode(events: list[StreamEvent], *, sse: bool, request: ChatRequest = REQUEST) -> bytes:
    encoder = GeminiStreamEncoder(request, sse=sse)
    return b"".join(encoder.encode(e) for e in events) + encoder.close()


def frames(data: bytes, sse: bool) -> list[dict]:
    if sse:
        assert data.endswith(b"\r\n\r\n")
        return [orjson.loads(f.removeprefix(b"data: ")) for f in data.split(b"\r\n\r\n") if f]
    assert data.startswith(b"[") and data.endswith(b"]")
    return orjson.loads(data)


CANONICAL: list[StreamEvent] = [
    StreamStart(id="msg_1", model="pub"),
    PartStart(index=0, kind="thinking"),
    ThinkingDelta(index=0, text="plan"),
    ThinkingDelta(index=0, signature="anthropic-sig"),
    PartStop(index=0),
    PartStart(index=1, kind="text"),
    TextDelta(index=1, text="Hi"),
    TextDelta(index=1, text=" there"),
    PartStop(index=1),
    PartStart(index=2, kind="tool_call", tool_call_id="toolu_1", tool_name="f"),
    ToolArgsDelta(index=2, partial_json='{"a"'),
    ToolArgsDelta(index=2, partial_json=": 1}"),
    PartStop(index=2),
    Finish(stop_reason="tool_use"),
    UsageReport(usage=Usage(input_tokens=10, output_tokens=8, reasoning_tokens=3, cache_read_tokens=4)),
]


@pytest.mark.parametrize("sse", [True, False])
def test_encode_both_framings(sse: bool) -> None:
    request = ChatRequest(model="pub", messages=[], thinking=Thinking(include_thoughts=True))
    data = encode(CANONICAL, sse=sse, request=request)
    if not sse:
        assert b",\r\n" in data
    out = frames(data, sse)
    parts = [p for f in out for c in f["candidates"] for p in c["content"].get("parts", [])]
    assert parts == [
        {"text": "plan", "thought": True},
        {"text": "", "thought": True, "thoughtSignature": "anthropic-sig"},
        {"text": "Hi"},
        {"text": " there"},
        {"functionCall": {"id": "toolu_1", "name": "f", "args": {"a": 1}}},
    ]
    assert all(f["responseId"] == "msg_1" and f["modelVersion"] == "pub" for f in out)
    final = out[-1]
    assert final["candidates"] == [{"content": {"role": "model"}, "index": 0, "finishReason": "STOP"}]
    assert final["usageMetadata"] == {
        "promptTokenCount": 10,
        "candidatesTokenCount": 5,
        "totalTokenCount": 18,
        "cachedContentTokenCount": 4,
        "thoughtsTokenCount": 3,
    }


def test_encode_hides_thoughts_unless_asked_but_keeps_signature() -> None:
    out = frames(encode(CANONICAL[:9], sse=True), True)
    parts = [p for f in out for c in f["candidates"] for p in c["content"].get("parts", [])]
    assert parts == [{"text": "Hi", "thoughtSignature": "anthropic-sig"}, {"text": " there"}]


def test_encode_then_decode_round_trip() -> None:
    request = ChatRequest(model="pub", messages=[], thinking=Thinking(include_thoughts=True))
    for sse in (True, False):
        events, complete = decode([encode(CANONICAL, sse=sse, request=request)])
        assert complete
        kinds = [(type(e).__name__, getattr(e, "kind", None)) for e in events]
        assert ("PartStart", "tool_call") in kinds
        assert events[-2:] == [
            Finish(stop_reason="tool_use"),
            UsageReport(
                usage=Usage(input_tokens=10, output_tokens=8, reasoning_tokens=3, cache_read_tokens=4)
            ),
        ]


def test_encode_empty_stream_is_valid() -> None:
    for sse in (True, False):
        out = frames(encode([StreamStart(id="x", model="m"), Finish(stop_reason="max_tokens")], sse=sse), sse)
        assert out[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"


def test_error_frames() -> None:
    sse = GeminiStreamEncoder(REQUEST, sse=True)
    body = orjson.loads(sse.error(502, "upstream_error", "cut").removeprefix(b"data: "))
    assert body["error"]["code"] == 502 and body["error"]["details"][0]["reason"] == "upstream_error"
    array = GeminiStreamEncoder(REQUEST, sse=False)
    assert orjson.loads(array.error(502, "upstream_error", "cut"))[0]["error"]["status"] == "INTERNAL"
    started = GeminiStreamEncoder(REQUEST, sse=False)
    head = started.encode(StreamStart(id="x", model="m")) + started.encode(TextDelta(index=0, text="a"))
    started.close()  # the relay may call close() and then send error() instead: still valid JSON
    out = orjson.loads(head + started.error(502, "upstream_error", "cut"))
    assert out[0]["candidates"][0]["content"]["parts"] == [{"text": "a"}] and "error" in out[1]
