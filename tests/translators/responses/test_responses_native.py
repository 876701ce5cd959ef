"""A native upstream's event stream: renamed to the gateway's response, terminal event held back
until the stream's close (so the turn can be stored first)."""

from __future__ import annotations

import orjson

from translators.responses.native import NativeStream
from translators.responses.response import ResponseMeta
from translators.responses.wire import ResponsesRequest


def sse(event: dict[str, object]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def test_renamed_and_terminal_event_held() -> None:
    meta = ResponseMeta(
        id="resp_ours",
        model="public",
        request=ResponsesRequest(model="public", previous_response_id="resp_prev"),
    )
    stream = NativeStream(meta, input_estimate=5)
    upstream = {
        "id": "resp_theirs",
        "model": "private",
        "status": "in_progress",
        "output": [],
        "store": False,
    }
    done = {
        **upstream,
        "status": "completed",
        "output": [{"type": "message", "id": "msg_1"}],
        "usage": {
            "input_tokens": 9,
            "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens_details": {"reasoning_tokens": 1},
            "total_tokens": 11,
        },
    }
    data = (
        sse({"type": "response.created", "sequence_number": 0, "response": upstream})
        + sse({"type": "response.output_text.delta", "sequence_number": 1, "delta": "Hi", "item_id": "msg_1"})
        + sse({"type": "response.completed", "sequence_number": 2, "response": done})
    )
    out = b"".join(stream.feed(data[i : i + 7]) for i in range(0, len(data), 7))  # any chunking
    assert b"resp_theirs" not in out and b"private" not in out and b"response.completed" not in out
    created = orjson.loads(out.split(b"\n")[1].removeprefix(b"data: "))
    assert created["response"]["id"] == "resp_ours" and created["response"]["model"] == "public"
    assert created["response"]["previous_response_id"] == "resp_prev" and created["response"]["store"] is True
    assert not stream.complete or stream.final is not None
    tail = stream.close()
    assert b"response.completed" in tail and b"resp_ours" in tail
    assert stream.complete and stream.final is not None and stream.final["id"] == "resp_ours"
    usage = stream.usage()
    assert (usage.input_tokens, usage.cache_read_tokens, usage.reasoning_tokens) == (9, 4, 1)
    assert not usage.estimated


def test_no_usage_is_estimated_and_cut_stream_is_incomplete() -> None:
    meta = ResponseMeta(id="resp_x", model="m", request=ResponsesRequest(model="m"))
    stream = NativeStream(meta, input_estimate=5)
    stream.feed(sse({"type": "response.output_text.delta", "sequence_number": 0, "delta": "some words here"}))
    assert stream.close() == b"" and not stream.complete and stream.final is None
    usage = stream.usage()
    assert usage.estimated and usage.input_tokens == 5 and usage.output_tokens > 0


def test_a_cut_stream_leaves_half_an_event_that_close_drops() -> None:
    """The upstream closed in the middle of an event: ``close`` must not raise (the relay calls it
    to end the stream, and then writes the error event itself)."""
    meta = ResponseMeta(id="resp_ours", model="public", request=ResponsesRequest(model="public"))
    stream = NativeStream(meta, input_estimate=5)
    delta = {"type": "response.output_text.delta", "sequence_number": 1, "delta": "hi"}
    assert b'"hi"' in stream.feed(sse(delta) + b'data: {"type": "response.output_te')
    assert stream.close() == b"" and not stream.complete
