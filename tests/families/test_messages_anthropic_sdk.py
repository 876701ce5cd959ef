"""End to end with the official ``anthropic`` SDK against a running gateway.

Each behaviour runs on three upstreams: the message-protocol upstream (same-format fast path), a
chat-protocol upstream and a v1beta upstream (both translated), all served by the simulator. Error
envelopes, count_tokens, prompt caching and aliasing are checked on the messages upstream.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
import pytest_asyncio

PNG_1PX = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
PRICE = {"input_per_mtok": 3, "output_per_mtok": 15, "cache_write_per_mtok": 3.75, "cache_read_per_mtok": 0.3}
# public model -> the upstream protocol serving it
MODELS = {"sim-claude": "messages", "claude-via-chat": "chat", "claude-via-gemini": "v1beta"}


@pytest_asyncio.fixture
async def mgw(gateway_server: Any, make_config: Any, simulator: Any) -> AsyncIterator[Any]:
    """A gateway whose Claude-style models are served by each upstream protocol, plus an alias."""
    config = make_config(
        extra_models=[{"id": m, "price": PRICE}
                      for m in ("claude-via-chat", "claude-via-gemini", "claude-alias", "claude-cut",
                                "claude-bad", "claude-nousage", "claude-cut-via-chat",
                                "claude-nousage-via-chat")],
        extra_upstreams=[
            {"name": "chat-for-claude", "protocol": "chat", "base_url": simulator.base_url,
             "api_key": "sk-sim", "models": {"claude-via-chat": "sim-chat"}},
            {"name": "gemini-for-claude", "protocol": "v1beta", "base_url": simulator.base_url,
             "api_key": "sk-sim", "models": {"claude-via-gemini": "sim-gemini"}},
            {"name": "anthropic-alias", "protocol": "messages", "base_url": simulator.base_url,
             "api_key": "sk-sim", "models": {
                 "claude-alias": "claude-sim-opus",
                 # simulator faults, named in the upstream model id
                 "claude-cut": "claude-sim-cut3", "claude-bad": "claude-sim-fail400",
                 "claude-nousage": "claude-sim-nousage"}},
            {"name": "chat-faults", "protocol": "chat", "base_url": simulator.base_url, "api_key": "sk-sim",
             "models": {"claude-cut-via-chat": "sim-chat-cut3",
                        "claude-nousage-via-chat": "sim-chat-nousage"}},
        ])
    handle = await gateway_server(config)
    handle.user = await handle.create_user("m", quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="messages-e2e")
    yield handle
    for sdk in _CLIENTS.pop(id(handle), []):
        await sdk.close()


_CLIENTS: dict[int, list[anthropic.AsyncAnthropic]] = {}


def client(handle: Any, key: str | None = None) -> anthropic.AsyncAnthropic:
    """An SDK client on the gateway (closed when the gateway fixture ends)."""
    sdk = anthropic.AsyncAnthropic(base_url=handle.base_url, api_key=key or handle.key, max_retries=0)
    _CLIENTS.setdefault(id(handle), []).append(sdk)
    return sdk


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# --- generation on every upstream protocol ----------------------------------------------------------


@pytest.mark.parametrize("model", list(MODELS))
async def test_text(mgw: Any, model: str) -> None:
    message = await client(mgw).messages.create(model=model, max_tokens=100,
                                                messages=[user("sim:echo hi there")])
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    assert message.model == model
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "[simulated] sim:echo hi there"
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


@pytest.mark.parametrize("model", list(MODELS))
async def test_max_tokens_stop(mgw: Any, model: str) -> None:
    message = await client(mgw).messages.create(model=model, max_tokens=5,
                                                messages=[user("sim:tokens=50 go")])
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 5


@pytest.mark.parametrize("model", list(MODELS))
async def test_stream(mgw: Any, model: str) -> None:
    async with client(mgw).messages.stream(model=model, max_tokens=100,
                                           messages=[user("sim:tokens=12 stream please")]) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert len(texts) > 1
    assert final.content[0].type == "text" and final.content[0].text == "".join(texts)
    assert final.model == model and final.id.startswith("msg_")
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 12
    assert final.usage.input_tokens > 0


@pytest.mark.parametrize("model", list(MODELS))
async def test_raw_stream_event_order(mgw: Any, model: str) -> None:
    stream = await client(mgw).messages.create(model=model, max_tokens=50, stream=True,
                                               messages=[user("sim:tokens=3 x")])
    names = [event.type async for event in stream]
    names = [n for n in names if n != "ping"]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    body = names[1:-2]
    assert body[0] == "content_block_start" and body[-1] == "content_block_stop"
    assert set(body[1:-1]) == {"content_block_delta"}


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("streamed", [False, True])
async def test_tools_round_trip(mgw: Any, model: str, streamed: bool) -> None:
    api = client(mgw)
    question = [user("What is the weather in Paris?")]
    if streamed:
        async with api.messages.stream(model=model, max_tokens=200, tools=[WEATHER_TOOL],
                                       messages=question) as stream:
            first = await stream.get_final_message()
    else:
        first = await api.messages.create(model=model, max_tokens=200, tools=[WEATHER_TOOL],
                                          messages=question)
    assert first.stop_reason == "tool_use"
    calls = [b for b in first.content if b.type == "tool_use"]
    assert len(calls) == 1
    call = calls[0]
    assert call.name == "get_weather" and call.id and isinstance(call.input, dict) and "city" in call.input
    replayed = [b.model_dump(exclude_none=True) for b in first.content]
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "18C, sunny"}
    history = [*question, {"role": "assistant", "content": replayed}, {"role": "user", "content": [result]}]
    second = await api.messages.create(model=model, max_tokens=200, tools=[WEATHER_TOOL], messages=history)
    assert second.stop_reason == "end_turn"
    assert "18C, sunny" in second.content[-1].text


@pytest.mark.parametrize("model", list(MODELS))
async def test_forced_tool_choice(mgw: Any, model: str) -> None:
    other = {"name": "noop", "description": "does nothing",
             "input_schema": {"type": "object", "properties": {}}}
    message = await client(mgw).messages.create(
        model=model, max_tokens=100, tools=[other, WEATHER_TOOL],
        tool_choice={"type": "tool", "name": "get_weather"}, messages=[user("hello")])
    assert [b.name for b in message.content if b.type == "tool_use"] == ["get_weather"]


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("streamed", [False, True])
async def test_thinking(mgw: Any, model: str, streamed: bool) -> None:
    params: dict[str, Any] = {"model": model, "max_tokens": 3000,
                              "messages": [user("Think: why is the sky blue?")],
                              "thinking": {"type": "enabled", "budget_tokens": 1024}}
    if streamed:
        async with client(mgw).messages.stream(**params) as stream:
            message = await stream.get_final_message()
    else:
        message = await client(mgw).messages.create(**params)
    kinds = [b.type for b in message.content]
    assert kinds == ["thinking", "text"]  # spec 4.7 rule 2
    assert message.content[0].thinking
    if MODELS[model] == "messages":
        assert message.content[0].signature  # only the message protocol signs its thinking
    if MODELS[model] == "chat":  # the chat upstream counts its reasoning tokens apart
        details = message.usage.output_tokens_details
        assert details is not None and 0 < details.thinking_tokens < message.usage.output_tokens


@pytest.mark.parametrize("model", list(MODELS))
async def test_image_base64(mgw: Any, model: str) -> None:
    content = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1PX}},
               {"type": "text", "text": "sim:echo describe it"}]
    message = await client(mgw).messages.create(model=model, max_tokens=50,
                                                messages=[{"role": "user", "content": content}])
    assert message.content[0].text == "[simulated] sim:echo describe it"
    plain = await client(mgw).messages.create(model=model, max_tokens=50,
                                              messages=[user("sim:echo describe it")])
    assert message.usage.input_tokens > plain.usage.input_tokens  # the image was counted upstream


@pytest.mark.parametrize("model", list(MODELS))
async def test_system_stop_sequences_and_metadata(mgw: Any, model: str) -> None:
    message = await client(mgw).messages.create(
        model=model, max_tokens=50, system=[{"type": "text", "text": "Be terse."}],
        metadata={"user_id": "end-user-7"}, stop_sequences=["NEVER-APPEARS"],
        messages=[user("sim:echo short"), {"role": "assistant", "content": "ok"}, user("sim:echo again")])
    assert message.content[0].text == "[simulated] sim:echo again"


# --- message-protocol specifics ---------------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
async def test_prompt_cache_usage(mgw: Any, streamed: bool) -> None:
    system = [{"type": "text", "text": f"Reference manual {uuid.uuid4().hex} " + "lorem ipsum " * 300,
               "cache_control": {"type": "ephemeral"}}]
    api = client(mgw)

    async def call() -> Any:
        params: dict[str, Any] = {"model": "sim-claude", "max_tokens": 20, "system": system,
                                  "messages": [user("sim:tokens=3 q")]}
        if streamed:
            async with api.messages.stream(**params) as stream:
                return await stream.get_final_message()
        return await api.messages.create(**params)

    first, second = await call(), await call()
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == first.usage.input_tokens  # the uncached rest
    # Metered with canonical semantics: prompt tokens include the cached ones.
    await mgw.gateway.meter.flush()  # the request log is written off the hot path
    reply = await mgw.request("GET", "/api/log/self", key=mgw.user_token)
    assert reply.status == 200, reply.text
    logged = sorted(reply.json()["data"]["items"], key=lambda item: item["created_at"])[-2:]
    for item, message in zip(logged, (first, second), strict=True):
        usage = message.usage
        assert item["prompt_tokens"] == (usage.input_tokens + usage.cache_creation_input_tokens
                                         + usage.cache_read_input_tokens)
        assert item["completion_tokens"] == usage.output_tokens


@pytest.mark.parametrize("streamed", [False, True])
async def test_alias_is_rewritten_both_ways(mgw: Any, streamed: bool) -> None:
    api = client(mgw)
    params: dict[str, Any] = {"model": "claude-alias", "max_tokens": 20, "messages": [user("sim:echo a")]}
    if streamed:
        async with api.messages.stream(**params) as stream:
            message = await stream.get_final_message()
    else:
        message = await api.messages.create(**params)
    assert message.model == "claude-alias"
    assert message.content[0].text == "[simulated] sim:echo a"


async def test_beta_header_and_request_id(mgw: Any) -> None:
    raw = await client(mgw).messages.with_raw_response.create(
        model="sim-claude", max_tokens=20, messages=[user("sim:echo b")],
        extra_headers={"anthropic-beta": "prompt-caching-2024-07-31"})
    assert raw.headers.get("x-service-request-id", "").startswith("req_")
    assert (await raw.parse()).content[0].text == "[simulated] sim:echo b"


async def upstream_requests(handle: Any, marker: str) -> list[dict[str, Any]]:
    """What the simulator received for prompts containing ``marker``."""
    reply = await handle.http.get(handle.gateway.config.upstreams[0].base_url + "/_sim/requests")
    entries = await reply.json()
    return [e for e in entries if marker in str(e.get("body_json_or_null"))]


@pytest.mark.parametrize("streamed", [False, True])
async def test_what_the_upstream_receives(mgw: Any, streamed: bool) -> None:
    marker = f"marker-{uuid.uuid4().hex}"
    params: dict[str, Any] = {"model": "claude-alias", "max_tokens": 20, "messages": [user(marker)],
                              "extra_headers": {"anthropic-beta": "prompt-caching-2024-07-31"},
                              "extra_body": {"service_tier": "auto"}}
    api = client(mgw)
    if streamed:
        async with api.messages.stream(**params) as stream:
            await stream.get_final_message()
    else:
        await api.messages.create(**params)
    (seen,) = await upstream_requests(mgw, marker)
    assert seen["path"] == "/v1/messages"
    headers = seen["headers"]
    assert headers["x-api-key"] == "sk-sim"  # the upstream's key, never the client's
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert "authorization" not in headers
    body = seen["body_json_or_null"]
    assert body["model"] == "claude-sim-opus"  # the alias, rewritten on the fast path
    assert body["service_tier"] == "auto" and body["messages"] == [user(marker)]


async def test_stream_cut_gives_an_in_band_error(mgw: Any) -> None:
    for model in ("claude-cut", "claude-cut-via-chat"):
        with pytest.raises(anthropic.APIStatusError) as info:
            async with client(mgw).messages.stream(model=model, max_tokens=50,
                                                   messages=[user("sim:tokens=20 x")]) as stream:
                await stream.get_final_message()
        assert envelope(info.value)["code"] == "upstream_error", model


async def test_truncated_answer_is_502(mgw: Any) -> None:
    with pytest.raises(anthropic.InternalServerError) as info:
        await client(mgw).messages.create(model="claude-cut", max_tokens=50, messages=[user("x")])
    assert info.value.status_code == 502
    assert envelope(info.value)["code"] == "upstream_error"


async def test_upstream_400_is_relayed(mgw: Any) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        await client(mgw).messages.create(model="claude-bad", max_tokens=50, messages=[user("x")])
    assert envelope(info.value)["message"] == "simulated failure"


async def test_upstream_without_usage(mgw: Any) -> None:
    # Same format: the answer is relayed as it came (the gateway meters an estimate).
    message = await client(mgw).messages.create(model="claude-nousage", max_tokens=50,
                                                messages=[user("sim:tokens=7 x")])
    assert message.content[0].text.startswith("[simulated]")
    # Translated: the client still gets usage figures, estimated offline.
    async with client(mgw).messages.stream(model="claude-nousage-via-chat", max_tokens=50,
                                           messages=[user("sim:tokens=7 x")]) as stream:
        final = await stream.get_final_message()
    assert final.usage.output_tokens > 0 and final.usage.input_tokens > 0


async def test_count_tokens(mgw: Any) -> None:
    api = client(mgw)
    small = await api.messages.count_tokens(model="sim-claude", messages=[user("hello")])
    big = await api.messages.count_tokens(
        model="sim-claude", system="You are a weather bot.", tools=[WEATHER_TOOL],
        messages=[user("hello " * 50)])
    assert 0 < small.input_tokens < big.input_tokens
    with pytest.raises(anthropic.NotFoundError):
        await api.messages.count_tokens(model="no-such-model", messages=[user("x")])


# --- error envelopes ----------------------------------------------------------------------------------------


def envelope(err: anthropic.APIStatusError) -> dict[str, Any]:
    body = err.body
    assert isinstance(body, dict) and body["type"] == "error", body
    return body["error"]


async def test_missing_key_is_401(mgw: Any) -> None:
    reply = await mgw.request("POST", "/v1/messages", json={"model": "sim-claude", "max_tokens": 5,
                                                            "messages": [user("x")]},
                              headers={"anthropic-version": "2023-06-01"})
    assert reply.status == 401
    assert reply.json()["type"] == "error"
    assert reply.json()["error"]["type"] == "authentication_error"
    assert reply.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(anthropic.AuthenticationError) as info:
        await client(mgw, key="sk-" + "x" * 40).messages.create(model="sim-claude", max_tokens=5,
                                                                  messages=[user("x")])
    assert envelope(info.value)["code"] == "invalid_api_key"


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
async def test_missing_version_header_is_400(mgw: Any, path: str) -> None:
    body = {"model": "sim-claude", "max_tokens": 5, "messages": [user("x")]}
    reply = await mgw.request("POST", path, json=body, headers={"x-api-key": mgw.key})
    assert reply.status == 400
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and "version" in error["message"]


async def test_vendor_header_names_work(mgw: Any) -> None:
    reply = await mgw.request("POST", "/v1/messages",
                              json={"model": "sim-claude", "max_tokens": 5, "messages": [user("sim:echo v")]},
                              headers={"x-api-key": mgw.key, "vendorb-version": "2023-06-01",
                                       "vendorb-beta": "prompt-caching-2024-07-31"})
    assert reply.status == 200, reply.text
    assert reply.json()["content"][0]["text"] == "[simulated] sim:echo v"


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize(("extra", "field"), [
    ({"temperature": 1.5}, "temperature"),
    ({"top_p": -1}, "top_p"),
])
async def test_bad_sampling_is_400(mgw: Any, model: str, extra: dict[str, Any], field: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        await client(mgw).messages.create(model=model, max_tokens=5, messages=[user("x")], extra_body=extra)
    error = envelope(info.value)
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert field in error["message"]


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "sim-claude", "messages": [user("x")]}, "max_tokens"),
    ({"model": "sim-claude", "max_tokens": 0, "messages": [user("x")]}, "max_tokens"),
    ({"model": "sim-claude", "max_tokens": 5, "messages": [{"role": "assistant", "content": "x"}]},
     "messages[0].role"),
    ({"model": "sim-claude", "max_tokens": 5, "messages": [user("a"), user("b")]}, "messages[1].role"),
    ({"model": "claude-via-chat", "max_tokens": 5,
      "messages": [{"role": "user", "content": [{"type": "bogus"}]}]}, "messages[0].content[0].type"),
])
async def test_validation_400_names_the_field(mgw: Any, body: dict[str, Any], field: str) -> None:
    reply = await mgw.request("POST", "/v1/messages", json=body,
                              headers={"x-api-key": mgw.key, "anthropic-version": "2023-06-01"})
    assert reply.status == 400, reply.text
    assert reply.json()["error"]["type"] == "invalid_request_error"
    assert f"`{field}" in reply.json()["error"]["message"]


@pytest.mark.parametrize("raw", [b"", b"{not json", b"[1, 2]", b'{"model": 5}', b"\xff" * 10,
                                 b'{"model": "\xff", "max_tokens": 1, "messages": []}'])
async def test_garbage_bodies_are_400(mgw: Any, raw: bytes) -> None:
    reply = await mgw.request("POST", "/v1/messages", data=raw,
                              headers={"x-api-key": mgw.key, "anthropic-version": "2023-06-01",
                                       "content-type": "application/json"})
    assert reply.status == 400
    assert reply.json()["type"] == "error"


async def test_unknown_model_is_404(mgw: Any) -> None:
    with pytest.raises(anthropic.NotFoundError) as info:
        await client(mgw).messages.create(model="claude-nonexistent", max_tokens=5, messages=[user("x")])
    error = envelope(info.value)
    assert (error["type"], error["code"]) == ("not_found_error", "model_not_found")


async def test_model_not_allowed_is_403(mgw: Any) -> None:
    restricted = await mgw.create_key(mgw.user["id"], name="only-chat", models=["sim-chat"])
    api = client(mgw, key=restricted["key"])
    with pytest.raises(anthropic.PermissionDeniedError) as info:
        await api.messages.create(model="sim-claude", max_tokens=5, messages=[user("x")])
    error = envelope(info.value)
    assert (error["type"], error["code"]) == ("permission_error", "model_not_allowed")
    with pytest.raises(anthropic.PermissionDeniedError):
        await api.messages.count_tokens(model="sim-claude", messages=[user("x")])
