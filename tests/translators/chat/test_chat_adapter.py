"""The ``chat`` UpstreamAdapter: canonical requests -> OpenAI wire, recorded answers -> canonical."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.relay.canonical import (
    CacheControl,
    ChatRequest,
    DocumentPart,
    EmbeddingRequest,
    ImagePart,
    Message,
    ResponseFormat,
    TextPart,
    Thinking,
    ThinkingPart,
    Tool,
    ToolCallPart,
    ToolChoice,
    ToolResultPart,
    Usage,
)
from gateway.runtime.errors import UpstreamError
from translators.chat.adapter import ChatAdapter
from translators.chat.embeddings import ChatEmbeddingRequest, floats_to_base64

SAMPLES = Path(__file__).parent / "samples"
ADAPTER = ChatAdapter()


def build(request: ChatRequest, model: str = "upstream-model") -> dict[str, Any]:
    call = ADAPTER.build_request(request, model)
    assert call.path == "/v1/chat/completions"
    return orjson.loads(call.body)


def test_auth_header() -> None:
    assert ADAPTER.auth_headers("sk-up") == {"Authorization": "Bearer sk-up"}
    assert ADAPTER.protocol == "chat"


def test_conversation_mapping() -> None:
    request = ChatRequest(
        model="public",
        system=[TextPart("Be brief.", cache_control=CacheControl()), TextPart("Be kind.")],
        messages=[
            Message(role="user", parts=[TextPart("Look:"), ImagePart(media_type="image/png", data="iVBOR"),
                                        ImagePart(url="https://x/y.jpg", detail="low"),
                                        DocumentPart(media_type="application/pdf", data="JVBER",
                                                     title="a.pdf"),
                                        DocumentPart(text="plain doc", title="Notes")]),
            Message(role="assistant", parts=[ThinkingPart(text="secret", signature="s"),
                                             TextPart("Checking."),
                                             ToolCallPart(id="t1", name="f", arguments='{"a":1}'),
                                             ToolCallPart(id="t2", name="g", arguments="")]),
            Message(role="user", parts=[
                ToolResultPart(tool_call_id="t1", content=[TextPart("ok"), ImagePart(url="https://x/r.png")]),
                ToolResultPart(tool_call_id="t2", content=[TextPart("bad")], is_error=True),
                TextPart("Go on."),
            ]),
        ],
    )
    body = build(request)
    assert body["model"] == "upstream-model"
    system, user, assistant, tool1, tool2, follow = body["messages"]
    assert system == {"role": "system", "content": "Be brief.\n\nBe kind."}
    assert user == {"role": "user", "content": [
        {"type": "text", "text": "Look:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.jpg", "detail": "low"}},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBER"}},
        {"type": "text", "text": "Notes\n\nplain doc"},
    ]}
    # Thinking in the history is dropped; tool calls become tool_calls.
    assert assistant == {"role": "assistant", "content": "Checking.", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}},
        {"id": "t2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}
    assert tool1 == {"role": "tool", "tool_call_id": "t1", "content": "ok"}
    assert tool2 == {"role": "tool", "tool_call_id": "t2", "content": "Error: bad"}
    # The tool result's image, which a tool message cannot hold, follows in the user message.
    assert follow == {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://x/r.png"}}, {"type": "text", "text": "Go on."}]}
    assert "stream" not in body and "max_tokens" not in body


def test_single_text_user_message_is_a_string() -> None:
    body = build(ChatRequest(model="p", messages=[Message(role="user", parts=[TextPart("hi")])]))
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_sampling_tools_and_stream_options() -> None:
    request = ChatRequest(
        model="p", messages=[Message(role="user", parts=[TextPart("hi")])], max_tokens=50, temperature=0.2,
        top_p=0.8, top_k=40, stop=["x"], stream=True, n=2, seed=3, presence_penalty=0.1,
        frequency_penalty=0.2, user="u", parallel_tool_calls=False,
        tools=[Tool(name="f", description="does f", parameters={"type": "object", "properties": {}}),
               Tool(name="g")],
        tool_choice=ToolChoice(mode="any"),
        response_format=ResponseFormat(type="json_schema", name="out", json_schema={"type": "object"},
                                       strict=True),
        extra={"top_k_vendor": 1})
    body = build(request)
    assert body["max_tokens"] == 50 and "max_completion_tokens" not in body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2 and body["top_p"] == 0.8 and body["stop"] == ["x"] and body["n"] == 2
    assert body["seed"] == 3 and body["presence_penalty"] == 0.1 and body["frequency_penalty"] == 0.2
    assert body["user"] == "u" and body["parallel_tool_calls"] is False
    assert body["tools"] == [
        {"type": "function", "function": {"name": "f", "description": "does f",
                                          "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {}}}}]
    assert body["tool_choice"] == "required"
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "out", "schema": {"type": "object"}, "strict": True}}
    assert "top_k" not in body and "top_k_vendor" not in body  # no OpenAI meaning; extra is another format's


@pytest.mark.parametrize(("choice", "wire"), [
    (ToolChoice(mode="auto"), "auto"), (ToolChoice(mode="none"), "none"),
    (ToolChoice(mode="any"), "required"),
    (ToolChoice(mode="tool", name="f"), {"type": "function", "function": {"name": "f"}}),
])
def test_tool_choice(choice: ToolChoice, wire: Any) -> None:
    request = ChatRequest(model="p", messages=[], tools=[Tool(name="f")], tool_choice=choice)
    assert build(request)["tool_choice"] == wire


@pytest.mark.parametrize(("thinking", "effort"), [
    (Thinking(budget_tokens=1024), "low"), (Thinking(budget_tokens=1025), "medium"),
    (Thinking(budget_tokens=8192), "medium"), (Thinking(budget_tokens=20000), "high"),
    (Thinking(effort="minimal"), "minimal"), (Thinking(), "medium"),
])
def test_thinking_becomes_reasoning_effort(thinking: Thinking, effort: str) -> None:
    body = build(ChatRequest(model="p", messages=[], thinking=thinking, max_tokens=2000))
    assert body["reasoning_effort"] == effort
    assert body["max_completion_tokens"] == 2000 and "max_tokens" not in body


def test_disabled_thinking_is_left_out() -> None:
    body = build(ChatRequest(model="p", messages=[], thinking=Thinking(enabled=False), max_tokens=5))
    assert "reasoning_effort" not in body and body["max_tokens"] == 5


def test_decode_tool_call_response() -> None:
    response = ADAPTER.decode_response((SAMPLES / "chat_response_tools.json").read_bytes(),
                                       ChatRequest(model="p", messages=[]))
    assert response.id == "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG"
    assert response.model == "gpt-4o-2024-08-06" and response.created == 1741570283
    (candidate,) = response.candidates
    assert candidate.stop_reason == "tool_use"
    assert candidate.parts == [
        ToolCallPart(id="call_abc123", name="get_weather", arguments='{"city":"Paris"}'),
        ToolCallPart(id="call_def456", name="get_weather", arguments='{"city":"Oslo"}')]
    assert response.usage == Usage(input_tokens=82, output_tokens=17, cache_read_tokens=64)


def test_decode_reasoning_response() -> None:
    response = ADAPTER.decode_response((SAMPLES / "chat_response_reasoning.json").read_bytes(),
                                       ChatRequest(model="p", messages=[]))
    (candidate,) = response.candidates
    assert candidate.parts == [ThinkingPart(text="Compare 9.11 and 9.8: 0.11 < 0.8."),
                               TextPart("9.11 is smaller.")]
    assert candidate.stop_reason == "max_tokens"
    # DeepSeek's prompt_cache_hit_tokens is the cached part of the prompt.
    assert response.usage == Usage(input_tokens=20, output_tokens=120, cache_read_tokens=16,
                                   reasoning_tokens=100)


def test_decode_legacy_completion_body() -> None:
    response = ADAPTER.decode_response((SAMPLES / "completion_response.json").read_bytes(),
                                       ChatRequest(model="p", messages=[]))
    assert response.candidates[0].parts == [TextPart("\n\nThis is indeed a test")]
    assert response.usage == Usage(input_tokens=5, output_tokens=7)


@pytest.mark.parametrize("raw", [b"not json", b"[]", b'{"choices": "x"}', b'{"error": {"message": "boom"}}'])
def test_decode_garbage_is_an_upstream_error(raw: bytes) -> None:
    with pytest.raises(UpstreamError):
        ADAPTER.decode_response(raw, ChatRequest(model="p", messages=[]))


def test_error_message() -> None:
    assert ADAPTER.error_message((SAMPLES / "error_response.json").read_bytes()) == \
        "Invalid 'messages[0].role': 'robot'."
    assert ADAPTER.error_message(b'{"error": "plain"}') == "plain"
    assert ADAPTER.error_message(b'{"message": "flat"}') == "flat"
    assert ADAPTER.error_message(b"Bad Gateway") == "Bad Gateway"


def test_embedding_request_and_response() -> None:
    call = ADAPTER.build_embedding_request(EmbeddingRequest(model="public", inputs=["a", "b"], dimensions=4,
                                                            user="u"), "text-embedding-3-small")
    assert call.path == "/v1/embeddings"
    assert orjson.loads(call.body) == {"model": "text-embedding-3-small", "input": ["a", "b"],
                                       "encoding_format": "float", "dimensions": 4, "user": "u"}
    tokens = ChatEmbeddingRequest(model="p", inputs=[], token_inputs=[[1, 2], [3]])
    assert orjson.loads(ADAPTER.build_embedding_request(tokens, "m").body)["input"] == [[1, 2], [3]]
    response = ADAPTER.decode_embedding_response((SAMPLES / "embeddings_response_float.json").read_bytes(),
                                                 EmbeddingRequest(model="p", inputs=["a", "b"]))
    assert response.vectors[0] == [0.0023064255, -0.009327292, -0.0028842222, 0.1]  # sorted by index
    assert response.vectors[1] == [0.5, -0.5, 0.5, -0.5]
    assert response.usage == Usage(input_tokens=8)
    as_base64 = orjson.dumps({"data": [{"index": 0, "embedding": floats_to_base64([0.5, -0.25])}],
                              "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1}})
    decoded = ADAPTER.decode_embedding_response(as_base64, EmbeddingRequest(model="p", inputs=["a"]))
    assert decoded.vectors == [[0.5, -0.25]]


def test_decode_tolerates_nulls_and_float_timestamps() -> None:
    raw = (b'{"id": null, "created": 1700000000.5, "model": null, "choices": [{"index": null, '
           b'"message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, '
           b'"finish_reason": "stop"}]}')
    response = ADAPTER.decode_response(raw, ChatRequest(model="p", messages=[]))
    assert response.model == "p" and response.created == 1700000000 and response.id
    assert response.candidates[0].parts == [TextPart("hi")] and response.usage == Usage()
