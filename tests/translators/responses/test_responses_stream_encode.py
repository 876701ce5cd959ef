"""Canonical stream events -> Responses events, checked against the openai SDK's own stream
accumulator (the state machine ``client.responses.stream`` runs), which raises on any event out of
order or any item whose identity changes."""

from __future__ import annotations

from typing import Any

import orjson
from openai import omit
from openai._models import construct_type_unchecked
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from gateway.relay.canonical import (
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
from translators.responses.response import ResponseMeta
from translators.responses.stream_encode import ResponsesStreamEncoder
from translators.responses.wire import ResponsesRequest


def events_of(data: bytes) -> list[dict[str, Any]]:
    out = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        kind, payload = block.split("\n")
        event = orjson.loads(payload.removeprefix("data: "))
        assert kind == f"event: {event['type']}"
        out.append(event)
    return out


def run(canonical: list[StreamEvent], usage: Usage) -> tuple[list[dict[str, Any]], ResponsesStreamEncoder]:
    encoder = ResponsesStreamEncoder(
        ResponseMeta(id="resp_1", model="m", request=ResponsesRequest(model="m"))
    )
    data = encoder.start() + b"".join(encoder.encode(e) for e in canonical) + encoder.complete(usage)
    return events_of(data), encoder


def accumulate(events: list[dict[str, Any]]) -> Any:
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=[], text_format=omit)  # type: ignore[arg-type]
    for event in events:
        state.handle_event(construct_type_unchecked(type_=ResponseStreamEvent, value=event))  # type: ignore[arg-type]
    return state


THINK_TEXT_TOOL: list[StreamEvent] = [
    StreamStart(id="x", model="m"),
    PartStart(index=0, kind="thinking"),
    ThinkingDelta(index=0, text="let me "),
    ThinkingDelta(index=0, text="think"),
    ThinkingDelta(index=0, signature="sig=="),
    PartStop(index=0),
    PartStart(index=1, kind="text"),
    TextDelta(index=1, text="Hello"),
    TextDelta(index=1, text=" world"),
    PartStop(index=1),
    PartStart(index=2, kind="tool_call", tool_call_id="call_9", tool_name="get_weather"),
    ToolArgsDelta(index=2, partial_json='{"city":'),
    ToolArgsDelta(index=2, partial_json='"Oslo"}'),
    PartStop(index=2),
    Finish(stop_reason="tool_use"),
    UsageReport(Usage(input_tokens=10, output_tokens=7, cache_read_tokens=4, reasoning_tokens=3)),
]


def test_event_order_sequence_numbers_and_final_response() -> None:
    events, encoder = run(
        THINK_TEXT_TOOL, Usage(input_tokens=10, output_tokens=7, cache_read_tokens=4, reasoning_tokens=3)
    )
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    final = events[-1]["response"]
    assert final == encoder.final and final["id"] == "resp_1" and final["status"] == "completed"
    assert [i["type"] for i in final["output"]] == ["reasoning", "message", "function_call"]
    reasoning, message, call = final["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "let me think"}]
    assert reasoning["encrypted_content"] == "sig=="
    assert message["content"][0]["text"] == "Hello world" and message["status"] == "completed"
    assert call["call_id"] == "call_9" and call["arguments"] == '{"city":"Oslo"}'
    assert final["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": 17,
    }
    state = accumulate(events)  # the SDK accepts the whole sequence
    assert state._completed_response.output_text == "Hello world"


def test_max_tokens_is_incomplete() -> None:
    events, encoder = run(
        [
            StreamStart(id="x", model="m"),
            PartStart(index=0, kind="text"),
            TextDelta(index=0, text="cut"),
            PartStop(index=0),
            Finish(stop_reason="max_tokens"),
        ],
        Usage(input_tokens=1, output_tokens=1),
    )
    assert events[-1]["type"] == "response.incomplete"
    assert encoder.final is not None and encoder.final["incomplete_details"] == {
        "reason": "max_output_tokens"
    }


def test_error_clears_the_final_response() -> None:
    encoder = ResponsesStreamEncoder(
        ResponseMeta(id="resp_2", model="m", request=ResponsesRequest(model="m"))
    )
    encoder.start()
    encoder.complete(Usage())
    (event,) = events_of(encoder.error(502, "upstream_error", "cut"))
    assert event["type"] == "error" and event["code"] == "upstream_error" and encoder.final is None
