"""Streams: upstream SSE -> canonical events (any chunking) and canonical events -> client SSE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    ThinkingDelta,
    ToolArgsDelta,
    Usage,
    UsageReport,
)
from translators.messages.stream_decode import MessagesStreamDecoder
from translators.messages.stream_encode import MessagesStreamEncoder

REQUEST = ChatRequest(model="public-claude", messages=[Message(role="user", parts=[TextPart(text="hi")])])


def decode_all(data: bytes, size: int) -> tuple[list[StreamEvent], MessagesStreamDecoder]:
    decoder = MessagesStreamDecoder()
    events: list[StreamEvent] = []
    for i in range(0, len(data), size):
        events += decoder.feed(data[i:i + size])
    events += decoder.close()
    return events, decoder


def parse_sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Client-side view: (event name, payload) pairs, asserting the wire framing on the way."""
    out = []
    for block in data.split(b"\n\n"):
        if not block:
            continue
        name_line, data_line = block.split(b"\n")
        assert name_line.startswith(b"event: ") and data_line.startswith(b"data: ")
        name, payload = name_line[7:].decode(), orjson.loads(data_line[6:])
        assert payload["type"] == name
        out.append((name, payload))
    return out


EXPECTED_FULL = [
    StreamStart, PartStart, ThinkingDelta, ThinkingDelta, ThinkingDelta, PartStop, PartStart, PartStop,
    PartStart, TextDelta, TextDelta, PartStop, PartStart, ToolArgsDelta, ToolArgsDelta, PartStop,
    Finish, UsageReport,
]


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1000, 1 << 20])
def test_decode_any_chunking(sample: Callable[[str], bytes], size: int) -> None:
    events, decoder = decode_all(sample("stream_full.sse"), size)
    assert [type(e) for e in events] == EXPECTED_FULL
    assert decoder.complete
    start = events[0]
    assert isinstance(start, StreamStart) and start.id == "msg_01Stream"
    assert start.usage == Usage(input_tokens=135, output_tokens=1, cache_write_tokens=100,
                                cache_read_tokens=10)
    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(e.text for e in thinking) == "Let me think about héllo ✓."
    assert thinking[-1].signature == "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"
    starts = [e for e in events if isinstance(e, PartStart)]
    assert [(s.index, s.kind) for s in starts] == [(0, "thinking"), (1, "redacted_thinking"), (2, "text"),
                                                   (3, "tool_call")]
    assert starts[1].data == "EmwKAhgBEgy3va3pzix"
    assert (starts[3].tool_call_id, starts[3].tool_name) == ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello, world"
    args = "".join(e.partial_json for e in events if isinstance(e, ToolArgsDelta))
    assert orjson.loads(args) == {"location": "San Francisco"}
    assert all(e.index == 3 for e in events if isinstance(e, ToolArgsDelta))
    finish = events[-2]
    assert isinstance(finish, Finish) and finish.stop_reason == "tool_use"
    report = events[-1]
    assert isinstance(report, UsageReport)
    # The thinking share of the output, which the protocol does not report, is the output less the
    # estimate of the text and the tool call (14 tokens); the output itself is the upstream's.
    assert report.usage == Usage(input_tokens=135, output_tokens=89, cache_write_tokens=100,
                                 cache_read_tokens=10, reasoning_tokens=75)


def test_decode_crlf_and_no_trailing_blank_line(sample: Callable[[str], bytes]) -> None:
    data = sample("stream_full.sse").replace(b"\n", b"\r\n").rstrip()
    events, decoder = decode_all(data, 5)
    assert [type(e) for e in events] == EXPECTED_FULL and decoder.complete


def test_decode_error_event(sample: Callable[[str], bytes]) -> None:
    events, decoder = decode_all(sample("stream_error.sse"), 9)
    assert [type(e) for e in events] == [StreamStart, PartStart, TextDelta, UsageReport]
    assert not decoder.complete
    assert decoder.error_message == "overloaded_error: Overloaded"


def test_decode_cut_stream_is_incomplete(sample: Callable[[str], bytes]) -> None:
    data = sample("stream_full.sse")
    events, decoder = decode_all(data[: data.index(b"event: message_delta")], 50)
    assert not decoder.complete
    assert isinstance(events[-1], UsageReport)  # what was known (input) is still reported


def test_message_delta_usage_overwrites_start_figures() -> None:
    data = (b'data: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":'
            b'{"input_tokens":5,"output_tokens":1}}}\n\n'
            b'data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":'
            b'{"input_tokens":7,"cache_read_input_tokens":3,"output_tokens":10}}\n\n'
            b'data: {"type":"message_stop"}\n\n')
    events, _ = decode_all(data, 4)
    assert events[-1] == UsageReport(Usage(input_tokens=10, output_tokens=10, cache_read_tokens=3))
    assert isinstance(events[-2], Finish) and events[-2].stop_reason == "max_tokens"


def test_multiline_data_and_comments() -> None:
    """The core's SSE parser joins data lines: a payload split over two lines still decodes."""
    decoder = MessagesStreamDecoder()
    assert decoder.feed(b': keep-alive\nevent: x\ndata: {"type":\ndata: "message_stop"}\n') == []
    assert decoder.feed(b"\n") == [UsageReport(Usage())] and decoder.complete


# --- encoder ---------------------------------------------------------------------------------------


def encode(events: list[StreamEvent]) -> list[tuple[str, dict[str, Any]]]:
    encoder = MessagesStreamEncoder(REQUEST)
    data = b"".join(encoder.encode(e) for e in events) + encoder.close()
    assert encoder.content_type == "text/event-stream"
    return parse_sse(data)


def test_encode_exact_event_order() -> None:
    out = encode([
        StreamStart(id="chatcmpl-1", model="x", usage=Usage(input_tokens=40, cache_read_tokens=30)),
        PartStart(index=0, kind="thinking"), ThinkingDelta(index=0, text="hm"),
        ThinkingDelta(index=0, signature="sig"), PartStop(index=0),
        PartStart(index=1, kind="text"), TextDelta(index=1, text="Hi"), TextDelta(index=1, text="!"),
        PartStop(index=1),
        PartStart(index=2, kind="tool_call", tool_call_id="toolu_9", tool_name="f"),
        ToolArgsDelta(index=2, partial_json='{"a"'), ToolArgsDelta(index=2, partial_json=": 1}"),
        PartStop(index=2),
        Finish(stop_reason="tool_use"),
        UsageReport(Usage(input_tokens=40, output_tokens=12, cache_read_tokens=30)),
    ])
    block = ["content_block_start", "content_block_delta", "content_block_delta", "content_block_stop"]
    assert [n for n, _ in out] == ["message_start", *block, *block, *block, "message_delta", "message_stop"]
    start = out[0][1]["message"]
    assert start["id"] == "msg_chatcmpl1" and start["model"] == "public-claude" and start["content"] == []
    assert start["usage"] == {"input_tokens": 10, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 30, "output_tokens": 0}
    assert [p["index"] for n, p in out if n.startswith("content_block")] == [0] * 4 + [1] * 4 + [2] * 4
    assert out[1][1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert [p["delta"] for _, p in out[2:4]] == [{"type": "thinking_delta", "thinking": "hm"},
                                                 {"type": "signature_delta", "signature": "sig"}]
    assert out[6][1]["delta"] == {"type": "text_delta", "text": "Hi"}
    assert out[9][1]["content_block"] == {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}
    assert out[10][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"a"'}
    delta = out[13][1]
    assert delta["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert delta["usage"] == {"input_tokens": 10, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 30, "output_tokens": 12}


def test_encode_is_robust_to_missing_part_events() -> None:
    """Deltas without PartStart, parts never stopped, no usage report, no Finish."""
    out = encode([StreamStart(id="x", model="m"), TextDelta(index=0, text="a"),
                  ToolArgsDelta(index=1, partial_json="{}"), TextDelta(index=2, text="b")])
    names = [n for n, _ in out]
    assert names == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_stop",
                     "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert [p["index"] for n, p in out if n == "content_block_start"] == [0, 1, 2]
    assert out[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert out[-2][1]["usage"] == {"output_tokens": 0}


def test_encode_without_stream_start_and_other_candidates() -> None:
    out = encode([TextDelta(index=0, text="a"), TextDelta(index=0, text="z", candidate=1),
                  Finish(stop_reason="max_tokens"), Finish(stop_reason="end_turn", candidate=1)])
    assert out[0][0] == "message_start"
    assert "".join(p["delta"]["text"] for n, p in out if n == "content_block_delta") == "a"
    assert out[-2][1]["delta"]["stop_reason"] == "max_tokens"


def test_encode_redacted_thinking_and_stop_sequence() -> None:
    out = encode([StreamStart(id="msg_1", model="m"),
                  PartStart(index=0, kind="redacted_thinking", data="xyz"),
                  PartStop(index=0), Finish(stop_reason="stop_sequence", stop_sequence="END"),
                  UsageReport(Usage(input_tokens=1, output_tokens=2))])
    assert out[1][1]["content_block"] == {"type": "redacted_thinking", "data": "xyz"}
    assert out[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}


def test_encode_error_event() -> None:
    encoder = MessagesStreamEncoder(REQUEST)
    encoder.encode(StreamStart(id="x", model="m"))
    (event,) = parse_sse(encoder.error(502, "upstream_error", "boom"))
    assert event == ("error", {"type": "error", "error": {"type": "api_error", "message": "boom",
                                                          "code": "upstream_error"}})
    assert encoder.close() == b""


def test_round_trip_decode_then_encode(sample: Callable[[str], bytes]) -> None:
    """Upstream SSE -> canonical -> client SSE keeps every block and figure."""
    events, _ = decode_all(sample("stream_full.sse"), 13)
    out = encode(events)
    starts = [p["content_block"]["type"] for n, p in out if n == "content_block_start"]
    assert starts == ["thinking", "redacted_thinking", "text", "tool_use"]
    # Every figure kept; the thinking share (estimated) shown beside the output, which includes it.
    assert out[-2][1]["usage"] == {"input_tokens": 25, "cache_creation_input_tokens": 100,
                                   "cache_read_input_tokens": 10, "output_tokens": 89,
                                   "output_tokens_details": {"thinking_tokens": 75}}
    assert out[0][1]["message"]["id"] == "msg_01Stream"
