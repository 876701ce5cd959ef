"""End to end with the official ``openai`` SDK: the chat family against a running gateway.

``sim-chat``/``sim-embed`` reach an OpenAI-compatible upstream (the fast path); ``sim-claude`` and
``sim-gemini``/``sim-gemini-embed`` reach upstreams of the other protocols (translated); the
``aliased`` fixture adds ``chat-alias``, served by the chat upstream under the id ``sim-chat``.
"""

from __future__ import annotations

import asyncio
import base64
import struct
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
import pytest_asyncio

from gateway.accounts.records import RequestLog
from gateway.hooks.specs import hookimpl

TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


class LogSink:
    """Collects the metering records of the calls (``gateway_request_finished``)."""

    def __init__(self) -> None:
        self.logs: list[RequestLog] = []

    @hookimpl
    def gateway_request_finished(self, gateway: object, log: RequestLog) -> None:
        self.logs.append(log)

    async def last(self) -> RequestLog:
        for _ in range(200):  # the stream's record is written when the response ends
            if self.logs:
                return self.logs[-1]
            await asyncio.sleep(0.01)
        raise AssertionError("no request log")


@pytest_asyncio.fixture
async def setup(gateway_server: Any, make_config: Any) -> AsyncIterator[tuple[openai.AsyncOpenAI, LogSink]]:
    sink = LogSink()
    config = make_config(
        extra_models=[{"id": "chat-alias", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}],
        extra_upstreams=[{"name": "sim-openai-alias", "protocol": "chat",
                          "base_url": make_config().upstreams[0].base_url, "api_key": "sk-sim",
                          "models": {"chat-alias": "sim-chat"}}])
    handle = await gateway_server(config, extra_plugins=(sink,))
    user = await handle.create_user("u", quota_usd=100)
    key = (await handle.create_key(user["id"], name="k"))["key"]
    client = openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0)
    yield client, sink
    await client.close()


CHAT_MODELS = ["sim-chat", "sim-claude", "sim-gemini", "chat-alias"]


@pytest.mark.parametrize("model", CHAT_MODELS)
async def test_chat_plain(setup: tuple[openai.AsyncOpenAI, LogSink], model: str) -> None:
    client, sink = setup
    reply = await client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": "Be brief."},
                               {"role": "user", "content": "sim:echo hello there"}])
    assert reply.object == "chat.completion"
    assert reply.id.startswith("chatcmpl-")
    assert reply.model == model
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content == "[simulated] sim:echo hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    log = await sink.last()
    assert log.status == 200 and log.model == model and not log.usage_estimated
    assert log.prompt_tokens == reply.usage.prompt_tokens


@pytest.mark.parametrize("model", CHAT_MODELS)
async def test_tools_round_trip(setup: tuple[openai.AsyncOpenAI, LogSink], model: str) -> None:
    client, _ = setup
    messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                                 tool_choice="required")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.function.name == "get_weather"
    assert "city" in call.function.arguments
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"}]
    second = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
    assert second.choices[0].finish_reason == "stop"
    assert "18C and sunny" in (second.choices[0].message.content or "")


async def collect(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


@pytest.mark.parametrize("model", CHAT_MODELS)
@pytest.mark.parametrize("include_usage", [True, False])
async def test_stream_usage_only_when_asked(setup: tuple[openai.AsyncOpenAI, LogSink], model: str,
                                            include_usage: bool) -> None:
    client, sink = setup
    options: Any = {"include_usage": True} if include_usage else openai.omit
    chunks = await collect(await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "sim:echo streaming works"}], stream=True,
        stream_options=options))
    assert all(c.object == "chat.completion.chunk" and c.model == model for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "[simulated] sim:echo streaming works"
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage_chunks = [c for c in chunks if not c.choices]
    if include_usage:
        assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1]
        assert usage_chunks[0].usage.prompt_tokens > 0 and usage_chunks[0].usage.completion_tokens > 0
    else:
        assert usage_chunks == [] and all(c.usage is None for c in chunks)
    # Either way the gateway billed the upstream's own figures, not an estimate.
    log = await sink.last()
    assert log.is_stream and log.status == 200 and not log.usage_estimated
    assert log.prompt_tokens > 0 and log.completion_tokens > 0


@pytest.mark.parametrize("model", ["sim-chat", "sim-claude"])
async def test_streamed_tool_call(setup: tuple[openai.AsyncOpenAI, LogSink], model: str) -> None:
    client, _ = setup
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "weather?"}], tools=TOOLS, tool_choice="required",
        stream=True)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += delta.id or ""
                entry["name"] += (delta.function.name or "") if delta.function else ""
                entry["arguments"] += (delta.function.arguments or "") if delta.function else ""
    assert finish == "tool_calls"
    assert calls[0]["name"] == "get_weather" and calls[0]["id"]
    assert '"city"' in calls[0]["arguments"]


async def test_sdk_stream_helper_accumulates(setup: tuple[openai.AsyncOpenAI, LogSink]) -> None:
    client, _ = setup
    async with client.chat.completions.stream(
            model="sim-claude", messages=[{"role": "user", "content": "sim:echo helper"}],
            stream_options={"include_usage": True}) as stream:
        final = await stream.get_final_completion()
    assert final.choices[0].message.content == "[simulated] sim:echo helper"
    assert final.usage is not None and final.usage.total_tokens > 0


async def test_translated_validation_error_names_the_field(setup: tuple[openai.AsyncOpenAI, LogSink]) -> None:
    client, _ = setup
    with pytest.raises(openai.BadRequestError) as info:
        await client.chat.completions.create(model="sim-claude", messages=[{"role": "user", "content": "x"}],
                                             temperature=5)
    assert info.value.status_code == 400
    assert "temperature" in info.value.message
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="sim-claude", messages=[])


@pytest.mark.parametrize("model", ["sim-chat", "sim-claude"])
async def test_legacy_completions(setup: tuple[openai.AsyncOpenAI, LogSink], model: str) -> None:
    client, sink = setup
    plain = await client.completions.create(model=model, prompt="sim:echo legacy", max_tokens=30)
    assert plain.object == "text_completion" and plain.id.startswith("cmpl-") and plain.model == model
    assert plain.choices[0].text == "[simulated] sim:echo legacy"
    assert plain.choices[0].finish_reason == "stop"
    assert plain.usage is not None and plain.usage.prompt_tokens > 0
    chunks = await collect(await client.completions.create(
        model=model, prompt="sim:echo legacy stream", max_tokens=30, stream=True,
        stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "[simulated] sim:echo legacy stream"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    log = await sink.last()
    assert log.route == "/v1/completions" and not log.usage_estimated


async def test_legacy_completions_echo_and_default_length(setup: tuple[openai.AsyncOpenAI, LogSink]) -> None:
    client, _ = setup
    echoed = await client.completions.create(model="sim-claude", prompt="sim:echo once more", echo=True,
                                             max_tokens=30)
    assert echoed.choices[0].text == "sim:echo once more[simulated] sim:echo once more"
    chunks = await collect(await client.completions.create(model="sim-claude", prompt="sim:tokens=40 go",
                                                           echo=True, stream=True))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text.startswith("sim:tokens=40 go")
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]


async def test_legacy_completions_several_prompts_need_a_chat_upstream(
        setup: tuple[openai.AsyncOpenAI, LogSink]) -> None:
    client, _ = setup
    with pytest.raises(openai.BadRequestError) as info:
        await client.completions.create(model="sim-claude", prompt=["a", "b"])
    assert "prompt" in info.value.message
    reply = await client.completions.create(model="sim-chat", prompt=["sim:echo a", "sim:echo b"])
    assert reply.choices  # passed through untouched to the OpenAI-compatible upstream


def unpack(data: Any) -> list[float]:
    if isinstance(data, str):
        raw = base64.b64decode(data)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return list(data)


@pytest.mark.parametrize("model", ["sim-embed", "sim-gemini-embed"])
async def test_embeddings_float_base64_and_dimensions(setup: tuple[openai.AsyncOpenAI, LogSink],
                                                      model: str) -> None:
    client, sink = setup
    as_float = await client.embeddings.create(model=model, input=["first text", "second text"],
                                              encoding_format="float")
    assert as_float.object == "list" and as_float.model == model
    assert [d.index for d in as_float.data] == [0, 1]
    assert all(d.object == "embedding" for d in as_float.data)
    assert as_float.usage.prompt_tokens > 0 and as_float.usage.total_tokens == as_float.usage.prompt_tokens
    # The SDK asks for base64 by default and decodes it itself.
    default = await client.embeddings.create(model=model, input=["first text", "second text"])
    assert default.data[0].embedding == pytest.approx(as_float.data[0].embedding, abs=1e-6)
    # The wire form of base64: little-endian float32.
    raw = await client.embeddings.with_raw_response.create(model=model, input="first text",
                                                           encoding_format="base64")
    wire = raw.http_response.json()
    assert isinstance(wire["data"][0]["embedding"], str)
    assert unpack(wire["data"][0]["embedding"]) == pytest.approx(as_float.data[0].embedding, abs=1e-6)
    short = await client.embeddings.create(model=model, input="first text", dimensions=8)
    assert len(short.data[0].embedding) == 8
    log = await sink.last()
    assert log.route == "/v1/embeddings" and log.prompt_tokens > 0 and log.completion_tokens == 0


async def test_embedding_validation(setup: tuple[openai.AsyncOpenAI, LogSink]) -> None:
    client, _ = setup
    with pytest.raises(openai.BadRequestError) as info:
        await client.embeddings.create(model="sim-embed", input="x", dimensions=0)
    assert "dimensions" in info.value.message
    with pytest.raises(openai.BadRequestError):
        await client.embeddings.create(model="sim-embed", input="x", encoding_format="int8")  # type: ignore[arg-type]
