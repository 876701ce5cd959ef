"""Client ``/v1/chat/completions`` bodies -> ChatRequest, and the 400s that name the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.relay.canonical import (
    DocumentPart,
    ImagePart,
    TextPart,
    Thinking,
    ThinkingPart,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
)
from gateway.runtime.errors import InvalidRequest
from tests.relay.calls import client_call, forwarded
from translators.chat.frontend import ChatFrontend
from translators.chat.request import decode_chat_request

SAMPLES = Path(__file__).parent / "samples"


def body(**fields: Any) -> bytes:
    base: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    base.update(fields)
    return orjson.dumps(base)


def test_full_sample_maps_every_field() -> None:
    req = decode_chat_request((SAMPLES / "chat_request_full.json").read_bytes())
    assert req.model == "gpt-4o"
    assert [p.text for p in req.system] == ["You are terse.", "Answer in English."]
    user, assistant, results = req.messages
    assert user.role == "user"
    assert user.parts[0] == TextPart("What is in these pictures? Use the weather tool.")
    assert user.parts[1] == ImagePart(url="https://example.com/cat.png", detail="high")
    assert user.parts[2] == ImagePart(media_type="image/jpeg", data="/9j/4AAQSkZJRg==")
    assert user.parts[3] == DocumentPart(media_type="application/pdf", data="JVBERi0xLjQ=",
                                         title="report.pdf")
    assert assistant.role == "assistant"
    assert assistant.parts[0] == ThinkingPart(text="The user wants weather for two cities.")
    assert assistant.parts[1] == ToolCallPart(id="call_a", name="get_weather", arguments='{"city": "Paris"}')
    assert isinstance(assistant.parts[2], ToolCallPart)
    # Two consecutive tool messages and the user message after them share one user message.
    assert results.role == "user"
    first, second, text = results.parts
    assert first == ToolResultPart(tool_call_id="call_a", content=[TextPart("18C, sunny")],
                                   name="get_weather")
    assert isinstance(second, ToolResultPart) and second.content == [TextPart("-2C, snow")]
    assert text == TextPart("Thanks. Summarise.")
    assert req.max_tokens == 300  # max_completion_tokens wins over max_tokens
    assert req.stream and req.stream_usage
    assert req.n == 2
    assert req.temperature == 0.7 and req.top_p == 0.9
    assert req.stop == ["END", "STOP"]
    assert req.presence_penalty == 0.5 and req.frequency_penalty == -0.5
    assert req.logprobs is True and req.top_logprobs == 3
    assert req.seed == 42 and req.user == "user-1234"
    assert req.metadata == {"team": "search"}
    assert req.tools[0].name == "get_weather" and req.tools[0].parameters["required"] == ["city"]
    assert req.tool_choice == ToolChoice(mode="tool", name="get_weather")
    assert req.parallel_tool_calls is False
    assert req.response_format is not None and req.response_format.type == "json_schema"
    assert req.response_format.name == "summary" and req.response_format.strict is True
    assert req.thinking == Thinking(effort="high")
    # Unknown and unmapped fields are kept, decoded, for a same-format upstream.
    assert req.extra == {"modalities": ["text"], "store": False, "logit_bias": {"50256": -100},
                         "service_tier": "auto", "x_vendor_flag": {"nested": [1, 2, 3]}}


@pytest.mark.parametrize(("choice", "expected"), [
    ("auto", ToolChoice(mode="auto")),
    ("required", ToolChoice(mode="any")),
    ("none", ToolChoice(mode="none")),
])
def test_tool_choice_strings(choice: str, expected: ToolChoice) -> None:
    assert decode_chat_request(body(tool_choice=choice)).tool_choice == expected


def test_defaults_and_simple_fields() -> None:
    req = decode_chat_request(body(stop="END", max_tokens=10, stream=True))
    assert req.stop == ["END"]
    assert req.max_tokens == 10
    assert req.stream and not req.stream_usage  # no stream_options: no usage asked for
    assert req.n == 1 and req.thinking is None and req.extra == {}
    no_stream = decode_chat_request(body(stream_options={"include_usage": True}))
    assert no_stream.stream_usage is False


def test_reasoning_effort_none_disables_thinking() -> None:
    thinking = decode_chat_request(body(reasoning_effort="none")).thinking
    assert thinking == Thinking(enabled=False, effort="none")


def test_json_object_response_format() -> None:
    fmt = decode_chat_request(body(response_format={"type": "json_object"})).response_format
    assert fmt is not None and fmt.type == "json_object"


def test_assistant_text_refusal_and_reasoning_alias() -> None:
    req = decode_chat_request(body(messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "reasoning": "hmm", "content": [{"type": "text", "text": "a"},
                                                              {"type": "refusal", "refusal": "no"}]},
        {"role": "assistant", "content": ""},  # empty turns are dropped
        {"role": "user", "content": "again"},
    ]))
    assert [m.role for m in req.messages] == ["user", "assistant", "user"]
    assert req.messages[1].parts == [ThinkingPart(text="hmm"), TextPart("a"), TextPart("no")]


def test_tool_result_after_user_text_starts_new_message() -> None:
    req = decode_chat_request(body(messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "f", "arguments": ""}}]},
        {"role": "tool", "tool_call_id": "c1", "content": ""},
    ]))
    assert req.messages[1].parts == [ToolCallPart(id="c1", name="f", arguments="{}")]
    assert req.messages[2].parts == [ToolResultPart(tool_call_id="c1", content=[], name="f")]


def test_bare_base64_file_takes_type_from_name() -> None:
    req = decode_chat_request(body(messages=[{"role": "user", "content": [
        {"type": "file", "file": {"filename": "notes.txt", "file_data": "aGVsbG8="}}]}]))
    expected = DocumentPart(media_type="text/plain", data="aGVsbG8=", title="notes.txt")
    assert req.messages[0].parts == [expected]


BAD: list[tuple[bytes, str]] = [
    (b'{"messages": [{"role": "user", "content": "hi"}]}', "model"),
    (body(model=""), "model"),
    (body(messages=[]), "messages"),
    (body(messages="hello"), "messages"),
    (b'{"model": "m"}', "messages"),
    (body(messages=[{"role": "robot", "content": "x"}]), "messages[0].role"),
    (body(messages=[{"content": "x"}]), "messages[0].role"),
    (body(messages=[{"role": "user", "content": 5}]), "messages[0].content"),
    (body(messages=[{"role": "tool", "content": "x"}]), "messages[0].tool_call_id"),
    (body(messages=[{"role": "user", "content": [{"type": "video", "video": {}}]}]),
     "messages[0].content[0].type"),
    (body(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]),
     "messages[0].content[0].image_url.url"),
    (body(messages=[{"role": "user", "content": [{"type": "input_audio",
                                                   "input_audio": {"data": "AAA", "format": "wav"}}]}]),
     "messages[0].content[0]"),
    (body(messages=[{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}]),
     "messages[0].content[0].file"),
    (body(temperature=3), "temperature"),
    (body(temperature=-0.1), "temperature"),
    (body(temperature="hot"), "temperature"),
    (body(top_p=1.5), "top_p"),
    (body(n=0), "n"),
    (body(max_tokens=0), "max_tokens"),
    (body(max_completion_tokens="x"), "max_completion_tokens"),
    (body(presence_penalty=2.5), "presence_penalty"),
    (body(frequency_penalty=-3), "frequency_penalty"),
    (body(top_logprobs=21), "top_logprobs"),
    (body(stop=5), "stop"),
    (body(stream="yes"), "stream"),
    (body(tools=[{"type": "web_search"}]), "tools[0].type"),
    (body(tools=[{"type": "function", "function": {"description": "no name"}}]), "tools[0].function.name"),
    (body(tool_choice="sometimes"), "tool_choice"),
    (body(tool_choice={"type": "function"}), "tool_choice"),
    (body(response_format={"type": "xml"}), "response_format.type"),
    (body(response_format={"type": "json_schema"}), "response_format.json_schema"),
    (body(reasoning_effort=""), "reasoning_effort"),
    (body(metadata={"a": 1}), "metadata[...]"),  # msgspec does not say which key
]


@pytest.mark.parametrize(("raw", "param"), BAD, ids=[p for _, p in BAD])
def test_validation_names_the_field(raw: bytes, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_chat_request(raw)
    assert info.value.status == 400
    assert info.value.param == param
    assert f"`{param}" in info.value.message


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"', b"null", b"\xff\xfe"])
def test_malformed_bodies_are_400(raw: bytes) -> None:
    with pytest.raises(InvalidRequest):
        decode_chat_request(raw)
    with pytest.raises(InvalidRequest):
        ChatFrontend().peek(raw, None, False)


def test_frontend_is_lenient_only_after_forwarding() -> None:
    """Once a same-format upstream took the bytes, decode_request is only for estimates: an
    untranslatable part must not fail the call then."""
    raw = body(messages=[{"role": "user", "content": [{"type": "input_audio",
                                                       "input_audio": {"data": "AAA", "format": "wav"}}]}])
    frontend = ChatFrontend()
    with pytest.raises(InvalidRequest):
        client_call(frontend, raw).canonical()
    call = forwarded(client_call(frontend, raw), "m")
    frontend.fast_request(call)
    rough = call.canonical()
    assert rough.model == "m" and rough.messages[0].role == "user"
