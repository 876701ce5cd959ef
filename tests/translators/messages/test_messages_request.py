"""Client request decoding (every block type) and validation errors naming the field."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from gateway.relay.canonical import (
    CacheControl,
    DocumentPart,
    ImagePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from gateway.runtime.errors import InvalidRequest
from translators.messages import request
from translators.messages.client import MessagesFrontend


def body(**fields: object) -> bytes:
    base: dict[str, object] = {"model": "m", "max_tokens": 16,
                               "messages": [{"role": "user", "content": "hi"}]}
    base.update(fields)
    return orjson.dumps({k: v for k, v in base.items() if v is not ...})


def test_decode_every_block_type(sample: Callable[[str], bytes]) -> None:
    req = request.decode(sample("request_all_blocks.json"), beta="prompt-caching-2024-07-31")
    assert req.model == "claude-sonnet-4-5" and req.max_tokens == 2048 and req.stream is False
    assert req.system == [TextPart(text="You are a careful assistant."),
                          TextPart(text="Long reference manual ...", cache_control=CacheControl(ttl="1h"))]
    user, assistant, tool_turn, reply, last = req.messages
    assert [m.role for m in req.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert user.parts[0] == TextPart(text="Describe this image and the attached documents.")
    assert user.parts[1] == ImagePart(media_type="image/png", data=user.parts[1].data)
    assert user.parts[1].data.startswith("iVBOR")
    assert user.parts[2] == ImagePart(url="https://example.com/cat.jpg", cache_control=CacheControl())
    assert user.parts[3] == DocumentPart(media_type="application/pdf", data="JVBERi0xLjQK", title="Report")
    assert user.parts[4] == DocumentPart(text="Plain text document.", media_type="text/plain")
    assert user.parts[5] == DocumentPart(url="https://example.com/paper.pdf", media_type="application/pdf")
    assert user.parts[6] == DocumentPart(text="chunk one\nchunk two", media_type="text/plain")
    assert assistant.parts[0] == ThinkingPart(text="The user wants the weather too.",
                                              signature="EqQBCkYIARgCIkD...", origin="messages")
    assert assistant.parts[1] == ThinkingPart(redacted=True, data=assistant.parts[1].data, origin="messages")
    assert assistant.parts[2] == TextPart(text="Let me check the weather.")
    call = assistant.parts[3]
    assert isinstance(call, ToolCallPart) and call.id == "toolu_01A09q90qw90lq917835lq9"
    assert orjson.loads(call.arguments) == {"location": "Paris", "unit": "celsius"}
    result = tool_turn.parts[0]
    assert isinstance(result, ToolResultPart)
    assert result.tool_call_id == call.id and result.name == "get_weather"
    assert result.content == [TextPart(text="15 degrees"),
                              ImagePart(media_type="image/jpeg", data="/9j/4AAQSkZJRg==")]
    assert result.cache_control == CacheControl()
    assert tool_turn.parts[1] == TextPart(text="And tomorrow?")
    assert reply.parts == [TextPart(text="Checking tomorrow.")]
    assert last.parts == [ToolResultPart(tool_call_id="toolu_x2", is_error=True,
                                         content=[TextPart(text="error: no forecast")])]
    assert [t.name for t in req.tools] == ["get_weather", "noop"]
    assert req.tools[0].parameters["required"] == ["location"]
    assert req.tools[0].cache_control == CacheControl()
    assert req.tool_choice is not None
    assert (req.tool_choice.mode, req.tool_choice.name) == ("tool", "get_weather")
    assert req.parallel_tool_calls is False
    assert req.thinking is not None
    assert (req.thinking.enabled, req.thinking.budget_tokens, req.thinking.effort) == (True, 1024, "medium")
    assert req.stop == ["\n\nHuman:", "END"]
    assert (req.temperature, req.top_p, req.top_k) == (0.7, 0.9, 40)
    assert req.user == "user-1234"
    assert req.stream_usage is True
    assert req.response_format is not None and req.response_format.type == "json_schema"
    assert req.response_format.json_schema == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert req.extra["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert req.extra["messages"]["service_tier"] == "auto"
    assert req.extra["messages"]["container"] == "container_abc"
    assert "output_config" in req.extra["messages"]


def test_string_system_and_content() -> None:
    req = request.decode(body(system="Be brief.", stream=True))
    assert req.system == [TextPart(text="Be brief.")]
    assert req.messages[0].parts == [TextPart(text="hi")]
    assert req.stream is True and req.extra == {}


@pytest.mark.parametrize(("thinking", "effort", "expected"), [
    ({"type": "adaptive"}, None, (True, None, None)),
    ({"type": "disabled"}, None, (False, None, None)),
    (None, "high", (True, None, "high")),
    ({"type": "adaptive"}, "low", (True, None, "low")),
])
def test_thinking_modes(thinking: object, effort: object, expected: tuple[object, ...]) -> None:
    req = request.decode(body(thinking=thinking if thinking else ..., effort=effort if effort else ...))
    assert req.thinking is not None
    assert (req.thinking.enabled, req.thinking.budget_tokens, req.thinking.effort) == expected


def test_output_config_effort_as_the_sdk_sends_it() -> None:
    req = request.decode(body(output_config={"effort": "max"}))
    assert req.thinking is not None and req.thinking.effort == "max"


@pytest.mark.parametrize(("fields", "param"), [
    ({"max_tokens": ...}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": -5}, "max_tokens"),
    ({"max_tokens": 1.5}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_tokens": "10"}, "max_tokens"),
    ({"model": ...}, "model"),
    ({"model": ""}, "model"),
    ({"model": 3}, "model"),
    ({"temperature": 1.5}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": "hot"}, "temperature"),
    ({"top_p": 2}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"stream": "yes"}, "stream"),
    ({"messages": ...}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "assistant", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}, "messages[1].role"),
    ({"messages": [{"role": "system", "content": "a"}]}, "messages[0].role"),
    ({"messages": ["hi"]}, "messages[0]"),
])
def test_validation_names_the_field_in_peek_and_decode(fields: dict[str, object], param: str) -> None:
    raw = body(**fields)
    for decode in (request.peek, request.decode):
        with pytest.raises(InvalidRequest) as info:
            decode(raw)
        assert info.value.status == 400
        assert info.value.param == param, (decode, info.value.message)
        assert f"`{param}" in info.value.message


@pytest.mark.parametrize(("fields", "param"), [
    ({"messages": [{"role": "user", "content": [{"type": "video", "url": "x"}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages[0].content[0].text"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": "x"}]}]}, "messages[1].content[0].type"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
     "messages[0].content[0].source.type"),
    ({"tools": [{"name": "t"}]}, "tools[0].input_schema"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
    ({"tool_choice": {"type": "tool"}}, "tool_choice.name"),
    ({"tool_choice": {"type": "tool", "name": "missing"}}, "tool_choice.name"),
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "enabled", "budget_tokens": 32}}, "thinking.budget_tokens"),
    ({"thinking": {"type": "maybe"}}, "thinking.type"),
    ({"system": 5}, "system"),
    ({"stop_sequences": "END"}, "stop_sequences"),
    ({"metadata": {"user_id": 5}}, "metadata.user_id"),
])
def test_decode_only_validation(fields: dict[str, object], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        request.decode(body(**fields))
    assert info.value.param == param, info.value.message


@pytest.mark.parametrize("raw", [
    b"", b"not json", b"[]", b"null", b'{"model": "m"', b"\xff\xfe",
    b'{"model": "\xff", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}',
    b'{"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "zzz": "\xff"}',
])
def test_malformed_bodies_are_400(raw: bytes) -> None:
    with pytest.raises(InvalidRequest):
        request.decode(raw)
    if b"zzz" not in raw:  # peek skips unknown fields (the upstream judges them)
        with pytest.raises(InvalidRequest):
            request.peek(raw)


def test_peek_view() -> None:
    view = MessagesFrontend().peek(body(stream=True, max_tokens=77), None, False)
    assert (view.model, view.stream, view.max_tokens, view.stream_usage) == ("m", True, 77, True)
    assert view.input_tokens_estimate > 0


def test_count_tokens_decode_does_not_need_max_tokens() -> None:
    req = request.decode(body(max_tokens=...), require_max_tokens=False)
    assert req.max_tokens is None
