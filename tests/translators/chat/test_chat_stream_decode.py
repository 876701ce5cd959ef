"""An OpenAI-compatible upstream's SSE stream -> canonical events, whatever the chunking."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gateway.relay.canonical import (
    ChatRequest,
    Finish,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
    UsageReport,
)
from translators.chat.stream_decode import ChatStreamDecoder

SAMPLES = Path(__file__).parent / "samples"
REQUEST = ChatRequest(model="public", messages=[])


def decode(chunks: list[bytes]) -> tuple[list[StreamEvent], ChatStreamDecoder]:
    decoder = ChatStreamDecoder(REQUEST)
    events: list[StreamEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    return events, decoder


def split_randomly(raw: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    chunks, at = [], 0
    while at < len(raw):
        size = rng.randint(1, 40)
        chunks.append(raw[at:at + size])
        at += size
    return chunks


@pytest.mark.parametrize("name", ["chat_stream_text_usage.sse", "chat_stream_tools.sse",
                                  "chat_stream_reasoning.sse", "completion_stream.sse"])
def test_any_chunking_gives_the_same_events(name: str) -> None:
    raw = (SAMPLES / name).read_bytes()
    whole, decoder = decode([raw])
    assert decoder.complete
    for seed in range(20):
        assert decode(split_randomly(raw, seed))[0] == whole
    bytewise = [raw[i:i + 1] for i in range(len(raw))]
    assert decode(bytewise)[0] == whole
    assert decode([raw.replace(b"\n", b"\r\n")])[0] == whole  # CRLF line ends


def test_text_stream_with_usage() -> None:
    events, _ = decode([(SAMPLES / "chat_stream_text_usage.sse").read_bytes()])
    assert events == [
        StreamStart(id="chatcmpl-123", model="gpt-4o-mini", created=1694268190),
        PartStart(index=0, kind="text"),
        TextDelta(index=0, text="Hello"),
        TextDelta(index=0, text=' there "model":"x" data: [DONE]'),
        PartStop(index=0),
        Finish(stop_reason="end_turn"),
        UsageReport(usage=Usage(input_tokens=9, output_tokens=12, cache_read_tokens=4)),
    ]


def test_tool_call_deltas_accumulate_by_index() -> None:
    events, _ = decode([(SAMPLES / "chat_stream_tools.sse").read_bytes()])
    starts = [e for e in events if isinstance(e, PartStart)]
    assert [(s.index, s.kind, s.tool_call_id, s.tool_name) for s in starts] == [
        (0, "tool_call", "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"),
        (1, "tool_call", "call_second", "get_time")]
    args: dict[int, str] = {}
    for e in events:
        if isinstance(e, ToolArgsDelta):
            args[e.index] = args.get(e.index, "") + e.partial_json
    assert args == {0: '{"city": "Paris"}', 1: '{"tz": "CET"}'}
    # The first call is closed before the second starts, and both before Finish.
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("PartStop") < kinds.index("PartStart", kinds.index("PartStop"))
    assert events[-2] == Finish(stop_reason="tool_use")
    assert events[-1] == UsageReport(usage=Usage(input_tokens=50, output_tokens=30))


def test_reasoning_then_text() -> None:
    events, _ = decode([(SAMPLES / "chat_stream_reasoning.sse").read_bytes()])
    assert [type(e) for e in events] == [StreamStart, PartStart, ThinkingDelta, ThinkingDelta, PartStop,
                                         PartStart, TextDelta, TextDelta, PartStop, Finish, UsageReport]
    assert events[1] == PartStart(index=0, kind="thinking")
    assert events[5] == PartStart(index=1, kind="text")
    assert events[-1] == UsageReport(usage=Usage(input_tokens=10, output_tokens=8, reasoning_tokens=4))


def test_cut_stream_is_not_complete() -> None:
    raw = (SAMPLES / "chat_stream_text_usage.sse").read_bytes()
    events, decoder = decode([raw[: raw.index(b'"finish_reason":"stop"')]])
    assert not decoder.complete
    assert not any(isinstance(e, Finish | UsageReport) for e in events)


def test_missing_done_after_every_choice_finished_is_complete() -> None:
    raw = (SAMPLES / "chat_stream_tools.sse").read_bytes().replace(b"data: [DONE]\n\n", b"")
    events, decoder = decode([raw])
    assert decoder.complete
    assert isinstance(events[-1], UsageReport)


def test_done_without_finish_reason_finishes_open_choices() -> None:
    raw = (b'data: {"id":"a","model":"m","choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
           b"data: [DONE]\n\n")
    events, decoder = decode([raw])
    assert decoder.complete
    assert events[-2:] == [PartStop(index=0), Finish(stop_reason="end_turn")]


def test_several_choices_and_comments() -> None:
    raw = (b": keep-alive\n\n"
           b'data: {"id":"a","model":"m","choices":[{"index":1,"delta":{"content":"b"}},'
           b'{"index":0,"delta":{"content":"a"}}]}\n\n'
           b'data: {"id":"a","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"},'
           b'{"index":1,"delta":{},"finish_reason":"content_filter"}]}\n\n'
           b"data: [DONE]\n\n")
    events, _ = decode([raw])
    finishes = [e for e in events if isinstance(e, Finish)]
    assert finishes == [Finish(stop_reason="max_tokens", candidate=0), Finish(stop_reason="content_filter",
                                                                               candidate=1)]
    texts = [(e.candidate, e.text) for e in events if isinstance(e, TextDelta)]
    assert texts == [(1, "b"), (0, "a")]


def test_in_band_error_leaves_stream_incomplete() -> None:
    events, decoder = decode([b'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'])
    assert events == [] and not decoder.complete
    assert decoder.error == "overloaded"


def test_tool_calls_without_index() -> None:
    raw = (b'data: {"id":"a","model":"m","choices":[{"index":0,"delta":{"tool_calls":['
           b'{"id":"c1","type":"function","function":{"name":"f","arguments":"{\\"x\\""}}]}}]}\n\n'
           b'data: {"id":"a","model":"m","choices":[{"index":0,"delta":{"tool_calls":['
           b'{"function":{"arguments":":1}"}}]}}]}\n\n'
           b'data: {"id":"a","model":"m","choices":[{"index":0,"delta":{"tool_calls":['
           b'{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},'
           b'"finish_reason":"stop"}]}\n\n'
           b"data: [DONE]\n\n")
    events, _ = decode([raw])
    starts = [(e.index, e.tool_call_id) for e in events if isinstance(e, PartStart)]
    assert starts == [(0, "c1"), (1, "c2")]
    args = [(e.index, e.partial_json) for e in events if isinstance(e, ToolArgsDelta)]
    assert args == [(0, '{"x"'), (0, ":1}"), (1, "{}")]
    assert events[-1] == Finish(stop_reason="tool_use")  # "stop" after tool calls
