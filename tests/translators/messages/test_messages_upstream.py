"""The messages UpstreamAdapter's requests, and the round trip client wire -> canonical -> wire."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from gateway.relay.canonical import (
    CacheControl,
    ChatRequest,
    DocumentPart,
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
)
from translators.messages import request as client_request
from translators.messages.upstream import MessagesAdapter


def build(req: ChatRequest, model: str = "up-model") -> tuple[dict[str, Any], dict[str, str]]:
    call = MessagesAdapter().build_request(req, model)
    assert call.path == "/v1/messages"
    return orjson.loads(call.body), call.headers


def test_auth_headers() -> None:
    headers = MessagesAdapter().auth_headers("sk-up")
    assert headers == {"x-api-key": "sk-up", "anthropic-version": "2023-06-01"}


def test_round_trip_of_the_full_sample(sample: Callable[[str], bytes]) -> None:
    """Every mapped field comes back as the client sent it (model aside)."""
    original = orjson.loads(sample("request_all_blocks.json"))
    canonical = client_request.decode(sample("request_all_blocks.json"), beta="beta-a")
    wire, headers = build(canonical)
    assert headers == {"anthropic-beta": "beta-a"}
    assert wire["model"] == "up-model"
    original["tools"][1].pop("type")  # `custom` is the default tool type
    for key in ("max_tokens", "system", "tools", "tool_choice", "thinking", "stop_sequences", "temperature",
                "top_p", "top_k", "metadata", "service_tier", "container"):
        assert wire[key] == original[key], key
    assert wire["output_config"] == {**original["output_config"], "effort": "medium"}
    assert "stream" not in wire and "effort" not in wire
    # Messages: identical except content given as a string, and the document sources the canonical
    # model normalises (content -> text; url documents keep their url).
    sent = original["messages"]
    assert wire["messages"][1] == sent[1] and wire["messages"][2] == sent[2] and wire["messages"][4] == {
        "role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x2", "is_error": True,
                                     "content": [{"type": "text", "text": "error: no forecast"}]}]}
    assert wire["messages"][3] == {"role": "assistant",
                                   "content": [{"type": "text", "text": "Checking tomorrow."}]}
    first = wire["messages"][0]["content"]
    assert first[:4] == sent[0]["content"][:4]
    assert first[4] == sent[0]["content"][4]
    assert first[5] == {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}}
    assert first[6] == {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                       "data": "chunk one\nchunk two"}}


def test_translated_request_from_another_family() -> None:
    """What a chat client's canonical request becomes on a messages upstream."""
    req = ChatRequest(
        model="public",
        system=[TextPart(text="sys")],
        messages=[
            Message(role="user", parts=[TextPart(text="look"), TextPart(text=""),
                                        ImagePart(url="data:image/jpeg;base64,/9j/AAAA"),
                                        ImagePart(url="https://x/y.png", detail="high"),
                                        DocumentPart(media_type="application/pdf", data="JVBE")]),
            Message(role="assistant", parts=[ThinkingPart(text="unsigned reasoning"),
                                             ToolCallPart(id="call_1", name="f", arguments='{"q": 1}'),
                                             ToolCallPart(id="call_2", name="g", arguments="")]),
            Message(role="user",
                    parts=[ToolResultPart(tool_call_id="call_1", content=[TextPart(text="r1")])]),
            Message(role="user", parts=[TextPart(text="next"),
                                        ToolResultPart(tool_call_id="call_2", content=[], is_error=True)]),
            Message(role="assistant", parts=[]),
        ],
        temperature=1.6, stop=["x"], stream=True, n=1, seed=5, presence_penalty=0.5,
        tools=[Tool(name="f", parameters={"type": "object", "properties": {"q": {"type": "integer"}}}),
               Tool(name="g", description="gee")],
        tool_choice=ToolChoice(mode="any"), parallel_tool_calls=False,
        thinking=Thinking(effort="high"), user="u-1",
        response_format=ResponseFormat(type="json_schema", json_schema={"type": "object"}),
        extra={"logit_bias": {"1": 2}, "store": True},  # chat-only fields: never sent here
    )
    wire, headers = build(req)
    assert headers == {}
    assert wire == {
        "model": "up-model", "max_tokens": 4096, "system": "sys", "temperature": 1.0, "stop_sequences": ["x"],
        "stream": True,
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image",
                 "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/AAAA"}},
                {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                "data": "JVBE"}}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_1", "name": "f", "input": {"q": 1}},
                {"type": "tool_use", "id": "call_2", "name": "g", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "r1"}]},
                {"type": "tool_result", "tool_use_id": "call_2", "is_error": True},
                {"type": "text", "text": "next"}]},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"q": {"type": "integer"}}}},
                  {"name": "g", "description": "gee", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": {"type": "object"}}},
        "metadata": {"user_id": "u-1"},
    }


def test_thinking_and_tool_choice_variants() -> None:
    base = ChatRequest(model="p", messages=[Message(role="user", parts=[TextPart(text="q")])], max_tokens=50)
    base.thinking = Thinking(budget_tokens=20)
    assert build(base)[0]["thinking"] == {"type": "enabled", "budget_tokens": 20}
    base.thinking = Thinking(budget_tokens=500)  # over max_tokens (a v1beta budget is apart from it)
    assert build(base)[0]["thinking"] == {"type": "enabled", "budget_tokens": 49}
    base.thinking = Thinking(enabled=False)
    assert build(base)[0]["thinking"] == {"type": "disabled"}
    base.thinking = None
    base.tool_choice = ToolChoice(mode="tool", name="f")
    assert build(base)[0]["tool_choice"] == {"type": "tool", "name": "f"}
    base.tool_choice = ToolChoice(mode="none")
    assert build(base)[0]["tool_choice"] == {"type": "none"}
    base.tool_choice, base.parallel_tool_calls = None, False
    assert build(base)[0]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_cache_control_and_signed_thinking_survive() -> None:
    system = [TextPart(text="a", cache_control=CacheControl()), TextPart(text="b")]
    req = ChatRequest(model="p", system=system,
                      messages=[Message(role="user",
                                        parts=[TextPart(text="q", cache_control=CacheControl(ttl="1h"))]),
                                Message(role="assistant", parts=[ThinkingPart(text="t", signature="s"),
                                                                 ThinkingPart(redacted=True, data="d")])],
                      tools=[Tool(name="f", parameters={"type": "object"}, cache_control=CacheControl())])
    wire, _ = build(req)
    assert wire["system"] == [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                              {"type": "text", "text": "b"}]
    assert wire["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert wire["messages"][1]["content"] == [{"type": "thinking", "thinking": "t", "signature": "s"},
                                              {"type": "redacted_thinking", "data": "d"}]
    assert wire["tools"][0]["cache_control"] == {"type": "ephemeral"}
