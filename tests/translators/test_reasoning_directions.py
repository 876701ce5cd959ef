"""Reasoning state and counts in every direction, on recorded upstream answers (issue 37).

Each recorded answer of a message-protocol and a v1beta upstream (plain and streamed) is decoded,
encoded for a client of each text family (chat, message protocol, v1beta), read back the way a
client keeps it (its assistant turn), sent back by that client with a tool result, decoded, and
encoded for the same upstream: the signatures and redacted thinking the upstream gets must be
exactly those it issued, and every client answer must be valid in its format (v1beta signatures
base64). Usage is checked the same way, including a chat upstream's reasoning.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.relay.canonical import ChatRequest, ChatResponse, Message, StreamEvent, TextPart, Thinking
from gateway.settings.config import LimitsConfig
from translators.chat.adapter import ChatAdapter
from translators.chat.request import decode_chat_request
from translators.chat.response import ChatStreamEncoder, encode_chat_response
from translators.messages import request as messages_decoder
from translators.messages.response import encode_response as encode_messages
from translators.messages.stream_encode import MessagesStreamEncoder
from translators.messages.upstream import MessagesAdapter
from translators.v1beta.client import decode_generate_request
from translators.v1beta.frontend import encode_response as encode_v1beta
from translators.v1beta.stream_encode import GeminiStreamEncoder
from translators.v1beta.upstream import V1betaAdapter

ROOT = Path(__file__).parent
ADAPTERS: dict[str, Any] = {"messages": MessagesAdapter(), "v1beta": V1betaAdapter(), "chat": ChatAdapter()}
# protocol -> (plain answer, streamed answer, what was issued in each: thinking blocks, redacted, thoughts)
SAMPLES = {
    "messages": ("messages/samples/response_thinking_tool.json", "messages/samples/stream_full.sse"),
    "v1beta": ("v1beta/samples/response_thinking_tool.json", "v1beta/samples/stream_thinking.sse"),
}
ISSUED: dict[tuple[str, bool], dict[str, list[Any]]] = {
    ("messages", False): {"thinking": [("I should call the weather tool.",
                                        "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds")],
                          "redacted": ["EmwKAhgBEgy3va3pzix"]},
    ("messages", True): {"thinking": [("Let me think about héllo ✓.", "EqQBCgIYAhIM1gbcDa9GJwZA2b3h")],
                         "redacted": ["EmwKAhgBEgy3va3pzix"]},
    ("v1beta", False): {"signatures": ["Q2lJQmNxZ0Q="]},
    ("v1beta", True): {"signatures": ["c2ln"]},
}
REQUEST = ChatRequest(model="m", messages=[Message(role="user", parts=[TextPart("Weather?")])],
                      thinking=Thinking(budget_tokens=1024), stream=True)


def upstream_answer(protocol: str, streamed: bool) -> ChatResponse | list[StreamEvent]:
    data = (ROOT / SAMPLES[protocol][streamed]).read_bytes()
    adapter = ADAPTERS[protocol]
    if not streamed:
        return adapter.decode_response(data, REQUEST)  # type: ignore[no-any-return]
    decoder = adapter.stream_decoder(REQUEST, LimitsConfig())
    return [*decoder.feed(data), *decoder.close()]


def sse_payloads(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in data.decode().splitlines()
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")]


def encode(answer: ChatResponse | list[StreamEvent], plain: Callable[..., bytes], stream: Any) -> bytes:
    if isinstance(answer, ChatResponse):
        return plain(answer, REQUEST)
    return b"".join(stream.encode(e) for e in answer) + stream.close()


# --- each client family: its answer, kept as the client keeps it, and its next request ---------------

def messages_turn(answer: ChatResponse | list[StreamEvent]) -> tuple[dict[str, Any], str | None]:
    data = encode(answer, encode_messages, MessagesStreamEncoder(REQUEST))
    if isinstance(answer, ChatResponse):
        blocks = json.loads(data)["content"]
    else:
        blocks, partial = [], ""
        for event in sse_payloads(data):
            if event["type"] == "content_block_start":
                blocks.append(dict(event["content_block"]))
            elif event["type"] == "content_block_delta":
                d, block = event["delta"], blocks[-1]
                if d["type"] == "thinking_delta":
                    block["thinking"] += d["thinking"]
                elif d["type"] == "signature_delta":
                    block["signature"] += d["signature"]
                elif d["type"] == "text_delta":
                    block["text"] += d["text"]
                elif d["type"] == "input_json_delta":
                    partial += d["partial_json"]
            elif event["type"] == "content_block_stop" and blocks[-1]["type"] == "tool_use":
                blocks[-1]["input"], partial = json.loads(partial or "{}"), ""
    call = next((b["id"] for b in blocks if b["type"] == "tool_use"), None)
    return {"role": "assistant", "content": blocks}, call


def messages_request(turn: dict[str, Any], call: str | None) -> ChatRequest:
    answer: Any = [{"type": "tool_result", "tool_use_id": call, "content": "sunny"}] if call else "go on"
    body = {"model": "m", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Weather?"}, turn, {"role": "user", "content": answer}]}
    return messages_decoder.decode(json.dumps(body).encode())


def v1beta_turn(answer: ChatResponse | list[StreamEvent]) -> tuple[dict[str, Any], str | None]:
    data = encode(answer, encode_v1beta, GeminiStreamEncoder(REQUEST, sse=True))
    chunks = [json.loads(data)] if isinstance(answer, ChatResponse) else sse_payloads(data)
    parts = [p for c in chunks for cand in c.get("candidates", []) for p in cand["content"].get("parts", [])]
    for p in parts:  # what google-genai insists on: thoughtSignature is base64 bytes
        if "thoughtSignature" in p:
            base64.b64decode(p["thoughtSignature"], validate=True)
    call = next((p["functionCall"]["name"] for p in parts if "functionCall" in p), None)
    return {"role": "model", "parts": parts}, call


def v1beta_request(turn: dict[str, Any], call: str | None) -> ChatRequest:
    answer: Any = {"text": "go on"}
    if call:
        answer = {"functionResponse": {"name": call, "response": {"result": "sunny"}}}
    body = {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}, turn,
                         {"role": "user", "parts": [answer]}]}
    return decode_generate_request(json.dumps(body).encode(), "m", False)


def chat_turn(answer: ChatResponse | list[StreamEvent]) -> tuple[dict[str, Any], str | None]:
    data = encode(answer, encode_chat_response, ChatStreamEncoder(REQUEST))
    if isinstance(answer, ChatResponse):
        message = json.loads(data)["choices"][0]["message"]
    else:
        message = {"role": "assistant", "content": "", "reasoning_content": "", "reasoning_details": [],
                   "tool_calls": []}
        for chunk in sse_payloads(data):
            for choice in chunk.get("choices", []):
                d = choice["delta"]
                for key in ("content", "reasoning_content"):
                    message[key] += d.get(key) or ""
                message["reasoning_details"] += d.get("reasoning_details") or []
                for tc in d.get("tool_calls") or []:
                    if "id" in tc:
                        message["tool_calls"].append({"id": tc["id"], "type": "function",
                                                      "function": dict(tc["function"])})
                    else:
                        function = message["tool_calls"][tc["index"]]["function"]
                        function["arguments"] += tc["function"]["arguments"]
        message["tool_calls"] = message["tool_calls"] or None
    calls = message.get("tool_calls") or []
    return message, calls[0]["id"] if calls else None


def chat_request(turn: dict[str, Any], call: str | None) -> ChatRequest:
    answer = {"role": "tool", "tool_call_id": call, "content": "sunny"} if call else {"role": "user",
                                                                                        "content": "go on"}
    body = {"model": "m", "messages": [{"role": "user", "content": "Weather?"}, turn, answer]}
    return decode_chat_request(json.dumps(body).encode())


CLIENTS = {"chat": (chat_turn, chat_request), "messages": (messages_turn, messages_request),
           "v1beta": (v1beta_turn, v1beta_request)}


# --- what reached the upstream ---------------------------------------------------------------------

def sent_state(protocol: str, request: ChatRequest) -> dict[str, list[Any]]:
    body = json.loads(ADAPTERS[protocol].build_request(request, "upstream-m").body)
    if protocol == "messages":
        blocks = [b for m in body["messages"] if m["role"] == "assistant" for b in m["content"]]
        return {"thinking": [(b["thinking"], b["signature"]) for b in blocks if b["type"] == "thinking"],
                "redacted": [b["data"] for b in blocks if b["type"] == "redacted_thinking"]}
    parts = [p for c in body["contents"] if c["role"] == "model" for p in c["parts"]]
    return {"signatures": [p["thoughtSignature"] for p in parts if "thoughtSignature" in p]}


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("protocol", list(SAMPLES))
def test_state_comes_back_as_issued(protocol: str, client: str, streamed: bool) -> None:
    keep, send_back = CLIENTS[client]
    turn, call = keep(upstream_answer(protocol, streamed))
    assert sent_state(protocol, send_back(turn, call)) == ISSUED[(protocol, streamed)]


@pytest.mark.parametrize("client", list(CLIENTS))
@pytest.mark.parametrize("protocol", list(SAMPLES))
def test_another_upstream_never_gets_the_state(protocol: str, client: str) -> None:
    """A conversation moved to another protocol's model: its upstream gets none of the state."""
    keep, send_back = CLIENTS[client]
    request = send_back(*keep(upstream_answer(protocol, False)))
    other = "v1beta" if protocol == "messages" else "messages"
    assert sent_state(other, request) == {key: [] for key in ISSUED[(other, False)]}


# --- usage ---------------------------------------------------------------------------------------------

CHAT_SAMPLE = "chat/samples/chat_response_reasoning.json"


@pytest.mark.parametrize("protocol", ["messages", "v1beta", "chat"])
def test_usage_in_every_client_format(protocol: str) -> None:
    if protocol == "chat":
        answer = ADAPTERS["chat"].decode_response((ROOT / CHAT_SAMPLE).read_bytes(), REQUEST)
    else:
        answer = upstream_answer(protocol, False)
    assert isinstance(answer, ChatResponse)
    usage = answer.usage
    assert 0 < usage.reasoning_tokens < usage.output_tokens
    chat = json.loads(encode_chat_response(answer, REQUEST))["usage"]
    assert chat["completion_tokens"] == usage.output_tokens
    assert chat["completion_tokens_details"]["reasoning_tokens"] == usage.reasoning_tokens
    assert chat["total_tokens"] == chat["prompt_tokens"] + chat["completion_tokens"]
    gemini = json.loads(encode_v1beta(answer, REQUEST))["usageMetadata"]
    assert gemini["thoughtsTokenCount"] == usage.reasoning_tokens
    assert gemini["candidatesTokenCount"] + gemini["thoughtsTokenCount"] == usage.output_tokens
    assert gemini["totalTokenCount"] == (gemini["promptTokenCount"] + gemini["candidatesTokenCount"]
                                         + gemini["thoughtsTokenCount"])
    claude = json.loads(encode_messages(answer, REQUEST))["usage"]
    assert claude["output_tokens"] == usage.output_tokens  # thinking included, as the protocol counts


def test_google_genai_accepts_any_foreign_signature() -> None:
    """A message-protocol signature need not be base64 (proxies and other vendors send any
    string): google-genai, which validates thoughtSignature as base64 bytes, still reads the
    answer, and the signature comes back to its upstream unchanged."""
    from google.genai import types

    body = json.loads((ROOT / SAMPLES["messages"][False]).read_bytes())
    body["content"][0]["signature"] = "sig_01:not base64 at all!"
    answer = ADAPTERS["messages"].decode_response(json.dumps(body).encode(), REQUEST)
    parsed = types.GenerateContentResponse.model_validate_json(encode_v1beta(answer, REQUEST))
    assert parsed.candidates and parsed.candidates[0].content and parsed.candidates[0].content.parts
    parts = [p.model_dump(mode="json", by_alias=True, exclude_none=True)
             for p in parsed.candidates[0].content.parts]
    turn, call = {"role": "model", "parts": parts}, "get_weather"
    sent = sent_state("messages", v1beta_request(turn, call))
    assert sent["thinking"] == [("I should call the weather tool.", "sig_01:not base64 at all!")]
    assert sent["redacted"] == ["EmwKAhgBEgy3va3pzix"]
