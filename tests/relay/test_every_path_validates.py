"""A body invalid for its family is refused with 400 ``invalid_request`` naming the field, before
any upstream call, on the fast path (same-format upstream) as on the translated path, for every
text endpoint of the three families.

Each bad body carries a marker in a field every decoder ignores; the simulator's request log must
never see it.
"""

from __future__ import annotations

import secrets
from typing import Any

import anthropic
import openai
import orjson
import pytest

MSG = [{"role": "user", "content": "hi"}]
GEM = [{"role": "user", "parts": [{"text": "hi"}]}]
FUNC_TOOL_NO_NAME = [{"type": "function", "function": {"description": "no name"}}]

# (path, fast model, translated model, bad body (without model for v1beta), field named)
CHAT_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/chat/completions", {"max_tokens": 5}, "messages"),
    ("/v1/chat/completions", {"messages": "hi"}, "messages"),
    ("/v1/chat/completions", {"messages": MSG, "temperature": "hot"}, "temperature"),
    ("/v1/chat/completions", {"messages": [{"content": "no role"}]}, "messages[0]"),
    ("/v1/chat/completions", {"messages": MSG, "tools": FUNC_TOOL_NO_NAME}, "tools[0].function.name"),
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": "many"}, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
     "messages[0].content"),
    ("/v1/completions", {"prompt": {"not": "a prompt"}}, "prompt"),
    ("/v1/completions", {"prompt": "hi", "temperature": "hot"}, "temperature"),
    ("/v1/completions", {"prompt": "hi", "n": 0}, "n"),
]
CHAT_MODELS = [("sim-chat", "fast"), ("sim-claude", "translated"), ("sim-gemini", "translated")]

EMBED_CASES: list[tuple[dict[str, Any], str]] = [
    ({}, "input"),
    ({"input": {"text": "x"}}, "input"),
    ({"input": "x", "dimensions": "large"}, "dimensions"),
]

MESSAGES_CASES: list[tuple[dict[str, Any], str]] = [
    ({"max_tokens": 5}, "messages"),
    ({"max_tokens": 5, "messages": "hi"}, "messages"),
    ({"max_tokens": 5, "messages": MSG, "tools": [{"name": 5, "input_schema": {}}]}, "tools[0].name"),
    ({"max_tokens": 5, "messages": MSG, "tools": "calculator"}, "tools"),
    ({"max_tokens": 5, "messages": MSG, "temperature": "hot"}, "temperature"),
    ({"max_tokens": "five", "messages": MSG}, "max_tokens"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]},
     "messages[0].content"),
    ({"max_tokens": 5, "messages": MSG, "system": 42}, "system"),
]
MESSAGES_MODELS = [("sim-claude", "fast"), ("sim-chat", "translated")]

V1BETA_CASES: list[tuple[dict[str, Any], str]] = [
    ({}, "contents"),
    ({"contents": "hi"}, "contents"),
    ({"contents": [{"role": "robot", "parts": [{"text": "x"}]}]}, "contents[0].role"),
    ({"contents": [{"role": "user", "parts": []}]}, "contents[0].parts"),
    ({"contents": GEM, "generationConfig": {"temperature": "hot"}}, "generationConfig.temperature"),
    ({"contents": GEM, "generationConfig": {"maxOutputTokens": 0}}, "generationConfig.maxOutputTokens"),
    ({"contents": GEM, "tools": [{"functionDeclarations": "none"}]}, "tools[0].functionDeclarations"),
]
V1BETA_MODELS = [("sim-gemini", "fast"), ("sim-chat", "translated"), ("sim-claude", "translated")]
V1BETA_EMBED_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("embedContent", {}, "content"),
    ("embedContent", {"content": {"parts": "x"}}, "content.parts"),
    ("batchEmbedContents", {"requests": "x"}, "requests"),
    ("countTokens", {"contents": "hi"}, "contents"),
]


async def _reached(simulator: Any, gw: Any, marker: str) -> list[Any]:
    async with gw.http.get(simulator.base_url + "/_sim/requests") as resp:
        log = await resp.json()
    return [r for r in log if marker in orjson.dumps(r.get("body_json_or_null")).decode()]


def _assert_refused(reply: Any, field: str, family: str) -> None:
    assert reply.status == 400, reply.text
    body = reply.json()
    if family == "v1beta":
        assert body["error"]["status"] == "INVALID_ARGUMENT"
        assert body["error"]["details"][0]["reason"] == "invalid_request"
    elif family == "messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["code"] == "invalid_request"
    else:
        assert body["error"]["code"] == "invalid_request"
    assert f"`{field}" in body["error"]["message"], body


@pytest.mark.parametrize(("model", "path_kind"), CHAT_MODELS)
async def test_chat_family(gw: Any, simulator: Any, model: str, path_kind: str) -> None:
    marker = secrets.token_hex(8)
    for path, fields, field in CHAT_CASES:
        body = {"model": model, "x_marker": marker, **fields}
        reply = await gw.request("POST", path, key=gw.key, json=body)
        _assert_refused(reply, field, "chat")
    embed_model = "sim-embed" if path_kind == "fast" else "sim-gemini-embed"
    for fields, field in EMBED_CASES:
        reply = await gw.request("POST", "/v1/embeddings", key=gw.key,
                                 json={"model": embed_model, "x_marker": marker, **fields})
        _assert_refused(reply, field, "chat")
    assert await _reached(simulator, gw, marker) == []


@pytest.mark.parametrize(("model", "path_kind"), MESSAGES_MODELS)
async def test_messages_family(gw: Any, simulator: Any, model: str, path_kind: str) -> None:
    marker = secrets.token_hex(8)
    headers = {"anthropic-version": "2023-06-01"}
    for fields, field in MESSAGES_CASES:
        body = {"model": model, "metadata": {"user_id": marker}, **fields}
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            if path.endswith("count_tokens") and field == "max_tokens":
                continue  # count_tokens takes no max_tokens
            reply = await gw.request("POST", path, key=gw.key, json=body, headers=headers)
            _assert_refused(reply, field, "messages")
    assert await _reached(simulator, gw, marker) == []


@pytest.mark.parametrize(("model", "path_kind"), V1BETA_MODELS)
async def test_v1beta_family(gw: Any, simulator: Any, model: str, path_kind: str) -> None:
    marker = secrets.token_hex(8)
    for fields, field in V1BETA_CASES:
        for method in ("generateContent", "streamGenerateContent", "countTokens"):
            reply = await gw.request("POST", f"/v1beta/models/{model}:{method}", key=gw.key,
                                     json={"labels": {"m": marker}, **fields})
            _assert_refused(reply, field, "v1beta")
    embed_model = "sim-gemini-embed" if path_kind == "fast" else "sim-embed"
    for method, fields, field in V1BETA_EMBED_CASES:
        target = embed_model if method != "countTokens" else model
        reply = await gw.request("POST", f"/v1beta/models/{target}:{method}", key=gw.key,
                                 json={"labels": {"m": marker}, **fields})
        _assert_refused(reply, field, "v1beta")
    assert await _reached(simulator, gw, marker) == []


async def test_official_sdks_get_their_bad_request_error(gw: Any, simulator: Any) -> None:
    """What the SDKs let through (they do not validate types) is refused, fast path and all."""
    marker = secrets.token_hex(8)
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0) as client:
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model="sim-chat", messages=MSG, user=marker,
                                                 temperature="hot")  # type: ignore[arg-type]
        assert "`temperature`" in info.value.message
    async with anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=gw.key, max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(model="sim-claude", max_tokens=5, messages=MSG,  # type: ignore[arg-type]
                                         metadata={"user_id": marker},
                                         tools=[{"name": "calc", "input_schema": "not a schema"}])  # type: ignore[list-item]
        assert "`tools[0].input_schema`" in caught.value.message
    assert await _reached(simulator, gw, marker) == []
