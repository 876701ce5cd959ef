"""Whole answers: upstream message -> canonical (adapter) and canonical -> client message object."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from gateway.relay.canonical import (
    Candidate,
    ChatRequest,
    ChatResponse,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
)
from gateway.runtime.errors import UpstreamError
from translators.messages.client import MessagesFrontend
from translators.messages.upstream import MessagesAdapter

REQUEST = ChatRequest(model="public-claude", messages=[Message(role="user", parts=[TextPart(text="hi")])])


def test_decode_upstream_response(sample: Callable[[str], bytes]) -> None:
    decoded = MessagesAdapter().decode_response(sample("response_thinking_tool.json"), REQUEST)
    assert decoded.id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    (candidate,) = decoded.candidates
    thinking, redacted, text, call = candidate.parts  # server-tool blocks are skipped
    assert thinking == ThinkingPart(text="I should call the weather tool.",
                                    signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
                                    origin="messages")
    assert redacted == ThinkingPart(redacted=True, data="EmwKAhgBEgy3va3pzix", origin="messages")
    assert text == TextPart(text="I'll look that up.")
    assert isinstance(call, ToolCallPart) and call.name == "get_weather"
    assert orjson.loads(call.arguments) == {"location": "San Francisco, CA", "unit": "celsius"}
    assert candidate.stop_reason == "tool_use"
    # Anthropic input excludes cache tokens; canonical input includes them. The thinking share of
    # the output, not reported, is the output less the estimate of the text and the tool call (28).
    assert decoded.usage == Usage(input_tokens=1550, output_tokens=89, cache_write_tokens=1200,
                                  cache_read_tokens=300, reasoning_tokens=61)


@pytest.mark.parametrize(("wire", "canonical"), [
    ("end_turn", "end_turn"), ("max_tokens", "max_tokens"), ("stop_sequence", "stop_sequence"),
    ("tool_use", "tool_use"), ("refusal", "content_filter"), ("pause_turn", "end_turn"),
])
def test_stop_reasons_in(wire: str, canonical: str) -> None:
    body = orjson.dumps({"id": "msg_1", "model": "m", "content": [], "stop_reason": wire,
                         "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert MessagesAdapter().decode_response(body, REQUEST).candidates[0].stop_reason == canonical


def test_decode_garbage_is_an_upstream_error() -> None:
    with pytest.raises(UpstreamError):
        MessagesAdapter().decode_response(b"<html>bad gateway</html>", REQUEST)


def test_error_message() -> None:
    adapter = MessagesAdapter()
    body = b'{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}'
    assert adapter.error_message(body) == "max_tokens: too big"
    assert adapter.error_message(b"plain text failure") == "plain text failure"


def test_encode_response_shape() -> None:
    response = ChatResponse(
        id="chatcmpl-abc123", model="upstream-id", created=1,
        candidates=[Candidate(parts=[ThinkingPart(text="hmm"), TextPart(text="Hello"),
                                     ToolCallPart(id="call_1", name="f", arguments='{"x": 1}')],
                              stop_reason="tool_use")],
        usage=Usage(input_tokens=100, output_tokens=20, cache_read_tokens=30, cache_write_tokens=50))
    out = orjson.loads(MessagesFrontend().encode_response(response, REQUEST))
    assert out == {
        "id": "msg_chatcmplabc123", "type": "message", "role": "assistant", "model": "public-claude",
        "content": [{"type": "thinking", "thinking": "hmm", "signature": ""},
                    {"type": "text", "text": "Hello"},
                    {"type": "tool_use", "id": "call_1", "name": "f", "input": {"x": 1}}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 20, "cache_creation_input_tokens": 50, "cache_read_input_tokens": 30,
                  "output_tokens": 20},
    }


def test_reasoning_tokens_both_ways() -> None:
    body = orjson.dumps({"id": "msg_1", "model": "m", "content": [], "stop_reason": "end_turn",
                         "usage": {"input_tokens": 1, "output_tokens": 9,
                                   "output_tokens_details": {"thinking_tokens": 6}}})
    usage = MessagesAdapter().decode_response(body, REQUEST).usage
    assert (usage.output_tokens, usage.reasoning_tokens) == (9, 6)
    response = ChatResponse(id="x", model="m", created=1, candidates=[Candidate()], usage=usage)
    out = orjson.loads(MessagesFrontend().encode_response(response, REQUEST))
    assert out["usage"]["output_tokens_details"] == {"thinking_tokens": 6}


def test_encode_keeps_message_ids_and_maps_stop() -> None:
    response = ChatResponse(id="msg_keep", model="m", created=1,
                            candidates=[Candidate(parts=[TextPart(text="x")], stop_reason="stop_sequence",
                                                  stop_sequence="END")])
    out = orjson.loads(MessagesFrontend().encode_response(response, REQUEST))
    assert (out["id"], out["stop_reason"], out["stop_sequence"]) == ("msg_keep", "stop_sequence", "END")
    response.candidates[0].stop_reason = "content_filter"
    assert orjson.loads(MessagesFrontend().encode_response(response, REQUEST))["stop_reason"] == "refusal"
    response.candidates[0].stop_reason = None
    assert orjson.loads(MessagesFrontend().encode_response(response, REQUEST))["stop_reason"] == "end_turn"


def test_encode_bad_tool_arguments_stay_visible() -> None:
    response = ChatResponse(id="x", model="m", created=1, candidates=[Candidate(parts=[
        ToolCallPart(id="c", name="f", arguments="{not json"),
        ToolCallPart(id="d", name="g", arguments="")])])
    blocks = orjson.loads(MessagesFrontend().encode_response(response, REQUEST))["content"]
    assert blocks[0]["input"] == {"_raw_arguments": "{not json"} and blocks[1]["input"] == {}
