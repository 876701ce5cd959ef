"""Canonical answers -> ``chat.completion`` objects and ``chat.completion.chunk`` streams."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.relay.canonical import (
    Candidate,
    ChatRequest,
    ChatResponse,
    Finish,
    Message,
    PartStart,
    PartStop,
    StopReason,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolArgsDelta,
    ToolCallPart,
    Usage,
    UsageReport,
)
from translators.chat.response import ChatStreamEncoder, encode_chat_response


def request(**fields: Any) -> ChatRequest:
    messages = [Message(role="user", parts=[TextPart("hi")])]
    return ChatRequest(model="public-model", messages=messages, **fields)


def test_encode_text_thinking_and_usage() -> None:
    response = ChatResponse(id="msg_01", model="public-model", created=1700000000, candidates=[
        Candidate(index=0, stop_reason="end_turn",
                  parts=[ThinkingPart(text="hm", signature="sig"), TextPart("Hello"), TextPart(" you")])],
        usage=Usage(input_tokens=10, output_tokens=5, cache_read_tokens=4, cache_write_tokens=2,
                    reasoning_tokens=3))
    out = orjson.loads(encode_chat_response(response, request()))
    assert out["id"] == "chatcmpl-msg_01"
    assert out["object"] == "chat.completion"
    assert out["created"] == 1700000000 and out["model"] == "public-model"
    choice = out["choices"][0]
    # The signed thought also goes as a reasoning_details entry, for the client to hand back.
    assert choice == {"index": 0, "message": {"role": "assistant", "content": "Hello you", "refusal": None,
                                              "reasoning_content": "hm", "reasoning_details": [
                                                  {"type": "reasoning.text", "text": "hm", "signature": "sig",
                                                   "format": "unknown", "index": 0}]},
                      "logprobs": None, "finish_reason": "stop"}
    assert out["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                            "prompt_tokens_details": {"cached_tokens": 4},
                            "completion_tokens_details": {"reasoning_tokens": 3}}


def test_encode_tool_calls_and_candidates() -> None:
    response = ChatResponse(id="chatcmpl-x", model="m", created=1, candidates=[
        Candidate(index=1, parts=[TextPart("b")], stop_reason="max_tokens"),
        Candidate(index=0, stop_reason="tool_use",
                  parts=[ToolCallPart(id="call_1", name="f", arguments='{"a":1}')]),
    ])
    out = orjson.loads(encode_chat_response(response, request(n=2)))
    assert out["id"] == "chatcmpl-x"
    first, second = out["choices"]
    assert first["message"]["content"] is None
    assert first["message"]["tool_calls"] == [{"id": "call_1", "type": "function",
                                               "function": {"name": "f", "arguments": '{"a":1}'}}]
    assert first["finish_reason"] == "tool_calls"
    assert second == {"index": 1, "message": {"role": "assistant", "content": "b", "refusal": None},
                      "logprobs": None, "finish_reason": "length"}


@pytest.mark.parametrize(("stop", "finish"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"),
    ("content_filter", "content_filter"), (None, "stop"),
])
def test_finish_reason_map(stop: StopReason | None, finish: str) -> None:
    response = ChatResponse(id="i", model="m", created=1, candidates=[Candidate(parts=[TextPart("x")],
                                                                                 stop_reason=stop)])
    assert orjson.loads(encode_chat_response(response, request()))["choices"][0]["finish_reason"] == finish


def parse_sse(raw: bytes) -> list[Any]:
    events = [e for e in raw.split(b"\n\n") if e]
    assert all(e.startswith(b"data: ") for e in events), raw
    return [e[6:].decode() if e[6:] == b"[DONE]" else orjson.loads(e[6:]) for e in events]


EVENTS: list[StreamEvent] = [
    StreamStart(id="msg_1", model="public-model", created=1700000000),
    PartStart(index=0, kind="thinking"),
    ThinkingDelta(index=0, text="Let me think"),
    ThinkingDelta(index=0, text="", signature="sig"),
    PartStop(index=0),
    PartStart(index=1, kind="text"),
    TextDelta(index=1, text="Calling"),
    PartStop(index=1),
    PartStart(index=2, kind="tool_call", tool_call_id="toolu_1", tool_name="get_weather"),
    ToolArgsDelta(index=2, partial_json='{"city":'),
    ToolArgsDelta(index=2, partial_json='"Paris"}'),
    PartStop(index=2),
    PartStart(index=3, kind="tool_call", tool_call_id="toolu_2", tool_name="get_time"),
    ToolArgsDelta(index=3, partial_json="{}"),
    PartStop(index=3),
    Finish(stop_reason="tool_use"),
    UsageReport(usage=Usage(input_tokens=20, output_tokens=9, cache_read_tokens=5, reasoning_tokens=3)),
]


def run(encoder: ChatStreamEncoder, events: list[StreamEvent]) -> list[Any]:
    return parse_sse(b"".join(encoder.encode(e) for e in events) + encoder.close())


def test_stream_chunks_with_usage() -> None:
    chunks = run(ChatStreamEncoder(request(stream=True, stream_usage=True)), EVENTS)
    assert chunks[-1] == "[DONE]"
    body = chunks[:-1]
    assert {c["id"] for c in body} == {"chatcmpl-msg_1"}
    assert {c["object"] for c in body} == {"chat.completion.chunk"}
    assert all(c["model"] == "public-model" and c["created"] == 1700000000 for c in body)
    deltas = [c["choices"][0]["delta"] for c in body[:-1]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert deltas[1] == {"reasoning_content": "Let me think"}
    # The signed thought's entry comes whole when its part ends.
    assert deltas.pop(2) == {"reasoning_details": [{"type": "reasoning.text", "text": "Let me think",
                                                    "signature": "sig", "format": "unknown", "index": 0}]}
    assert deltas[2] == {"content": "Calling"}
    assert deltas[3] == {"tool_calls": [{"index": 0, "id": "toolu_1", "type": "function",
                                         "function": {"name": "get_weather", "arguments": ""}}]}
    assert deltas[4] == {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}
    assert deltas[5] == {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}
    assert deltas[6]["tool_calls"][0]["index"] == 1 and deltas[6]["tool_calls"][0]["id"] == "toolu_2"
    assert deltas[7] == {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}
    assert deltas[8] == {}
    assert [c["choices"][0]["finish_reason"] for c in body[:-1]] == [None] * 9 + ["tool_calls"]
    # With stream usage every chunk carries "usage": null and the last one the usage, no choices.
    assert all("usage" in c and c["usage"] is None for c in body[:-1])
    assert body[-1]["choices"] == []
    assert body[-1]["usage"] == {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29,
                                 "prompt_tokens_details": {"cached_tokens": 5},
                                 "completion_tokens_details": {"reasoning_tokens": 3}}


def test_stream_chunks_without_usage() -> None:
    chunks = run(ChatStreamEncoder(request(stream=True)), EVENTS)
    assert chunks[-1] == "[DONE]"
    assert all("usage" not in c for c in chunks[:-1])
    assert all(c["choices"] for c in chunks[:-1])  # no usage-only chunk
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_several_candidates_each_get_a_role() -> None:
    events: list[StreamEvent] = [
        StreamStart(id="x", model="m"),
        PartStart(index=0, kind="text", candidate=1), TextDelta(index=0, text="b", candidate=1),
        PartStop(index=0, candidate=1), Finish(stop_reason="end_turn", candidate=1),
        PartStart(index=0, kind="tool_call", candidate=0, tool_call_id="c", tool_name="f"),
        PartStop(index=0, candidate=0), Finish(stop_reason="tool_use", candidate=0),
    ]
    chunks = run(ChatStreamEncoder(request(n=2, stream=True)), events)
    assert [c["choices"][0]["index"] for c in chunks[:2]] == [0, 1]
    assert all(c["choices"][0]["delta"]["role"] == "assistant" for c in chunks[:2])
    assert "role" not in chunks[2]["choices"][0]["delta"]
    tool_chunk = chunks[4]
    assert tool_chunk["choices"][0]["index"] == 0
    assert tool_chunk["choices"][0]["delta"]["tool_calls"][0]["index"] == 0  # counted per choice


def test_stream_error_event_and_no_done() -> None:
    encoder = ChatStreamEncoder(request(stream=True))
    out = encoder.encode(StreamStart(id="x", model="m")) + encoder.error(502, "upstream_error", "cut")
    out += encoder.close()
    chunks = parse_sse(out)
    assert chunks[-1] == {"error": {"message": "cut", "type": "api_error", "code": "upstream_error"}}
    assert "[DONE]" not in chunks
    assert encoder.content_type == "text/event-stream"


def test_usage_reported_once() -> None:
    encoder = ChatStreamEncoder(request(stream=True, stream_usage=True))
    usage = UsageReport(usage=Usage(input_tokens=1, output_tokens=1))
    assert encoder.encode(usage)
    assert encoder.encode(usage) == b""
