"""End to end: the official ``openai`` SDK on a model served by a message-protocol upstream.

The chat family's Frontend decodes the client, the messages UpstreamAdapter speaks to the
simulator's ``/v1/messages`` and decodes its answers (whole and streamed) back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest_asyncio

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest_asyncio.fixture
async def api(gw: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0)
    yield sdk
    await sdk.close()


async def test_text(api: openai.AsyncOpenAI) -> None:
    completion = await api.chat.completions.create(
        model="sim-claude", max_tokens=50,
        messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "sim:echo hello"}])
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "[simulated] sim:echo hello"
    assert choice.finish_reason == "stop"
    assert completion.model == "sim-claude"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0


async def test_length_and_temperature_above_one(api: openai.AsyncOpenAI) -> None:
    # Chat allows temperature up to 2; the messages upstream gets it clamped to 1.
    completion = await api.chat.completions.create(
        model="sim-claude", max_tokens=4, temperature=1.7,
        messages=[{"role": "user", "content": "sim:tokens=30 long"}])
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 4


async def test_stream(api: openai.AsyncOpenAI) -> None:
    stream = await api.chat.completions.create(
        model="sim-claude", max_tokens=50, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "sim:tokens=9 go"}])
    texts: list[str] = []
    finish = None
    usage = None
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                texts.append(choice.delta.content)
            finish = choice.finish_reason or finish
        usage = chunk.usage or usage
    assert len(texts) > 1 and "".join(texts).startswith("[simulated]")
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == 9 and usage.prompt_tokens > 0


async def test_tools_round_trip(api: openai.AsyncOpenAI) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = await api.chat.completions.create(model="sim-claude", max_tokens=100, tools=[TOOL],
                                              messages=messages)  # type: ignore[arg-type]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "-3C, snow"}]
    second = await api.chat.completions.create(model="sim-claude", max_tokens=100, tools=[TOOL],
                                               messages=messages)  # type: ignore[arg-type]
    assert second.choices[0].finish_reason == "stop"
    assert "-3C, snow" in (second.choices[0].message.content or "")


async def test_streamed_tool_call(api: openai.AsyncOpenAI) -> None:
    stream = await api.chat.completions.create(model="sim-claude", max_tokens=100, tools=[TOOL], stream=True,
                                               messages=[{"role": "user", "content": "Weather in Rome?"}])
    names: list[str] = []
    arguments = ""
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                if delta.function and delta.function.name:
                    names.append(delta.function.name)
                if delta.function and delta.function.arguments:
                    arguments += delta.function.arguments
            finish = choice.finish_reason or finish
    assert names == ["get_weather"]
    assert "city" in json.loads(arguments)
    assert finish == "tool_calls"


async def test_reasoning_effort_becomes_thinking(api: openai.AsyncOpenAI) -> None:
    completion = await api.chat.completions.create(
        model="sim-claude", max_tokens=2000, reasoning_effort="low",
        messages=[{"role": "user", "content": "why?"}])
    message = completion.choices[0].message
    assert message.content
    assert (message.model_extra or {}).get("reasoning_content")  # the upstream's thinking block
    assert completion.usage is not None and completion.usage.completion_tokens > 0
