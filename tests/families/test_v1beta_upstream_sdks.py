"""End to end: the official ``openai`` and ``anthropic`` SDKs on a model served by a v1beta upstream.

The client family's Frontend decodes the request; the v1beta UpstreamAdapter speaks to the
simulator's ``/v1beta/models/...`` and decodes its answers (whole and streamed) back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest_asyncio

OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


@pytest_asyncio.fixture
async def oai(gw: Any) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0)
    yield sdk
    await sdk.close()


@pytest_asyncio.fixture
async def claude(gw: Any) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=gw.key, max_retries=0)
    yield sdk
    await sdk.close()


# --- openai ----------------------------------------------------------------------------------------


async def test_openai_text(oai: openai.AsyncOpenAI) -> None:
    completion = await oai.chat.completions.create(
        model="sim-gemini",
        max_tokens=50,
        messages=[
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "sim:echo hi gemini"},
        ],
    )
    choice = completion.choices[0]
    assert choice.message.content == "[simulated] sim:echo hi gemini"
    assert choice.finish_reason == "stop" and completion.model == "sim-gemini"
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens > 0


async def test_openai_length(oai: openai.AsyncOpenAI) -> None:
    completion = await oai.chat.completions.create(
        model="sim-gemini", max_tokens=3, messages=[{"role": "user", "content": "sim:tokens=20 go"}]
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 3


async def test_openai_stream(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.chat.completions.create(
        model="sim-gemini",
        max_tokens=50,
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "sim:tokens=7 go"}],
    )
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
    assert usage is not None and usage.completion_tokens == 7 and usage.prompt_tokens > 0


async def test_openai_tools_round_trip(oai: openai.AsyncOpenAI) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = await oai.chat.completions.create(
        model="sim-gemini", max_tokens=100, tools=[OPENAI_TOOL], messages=messages
    )  # type: ignore[arg-type]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and "city" in json.loads(call.function.arguments)
    # the tool message carries only the call id: the v1beta adapter recovers the function name
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "-3C, snow"},
    ]
    second = await oai.chat.completions.create(
        model="sim-gemini", max_tokens=100, tools=[OPENAI_TOOL], messages=messages
    )  # type: ignore[arg-type]
    assert second.choices[0].finish_reason == "stop"
    assert "-3C, snow" in (second.choices[0].message.content or "")


async def test_openai_stream_tools(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.chat.completions.create(
        model="sim-gemini",
        max_tokens=100,
        stream=True,
        tools=[OPENAI_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
    )
    names: list[str] = []
    args = ""
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                if tc.function and tc.function.name:
                    names.append(tc.function.name)
                if tc.function and tc.function.arguments:
                    args += tc.function.arguments
            finish = choice.finish_reason or finish
    assert names == ["get_weather"] and "city" in json.loads(args)
    assert finish == "tool_calls"


# --- anthropic -------------------------------------------------------------------------------------


async def test_anthropic_text(claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(
        model="sim-gemini",
        max_tokens=50,
        system="Be terse.",
        messages=[{"role": "user", "content": "sim:echo hi from claude sdk"}],
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "[simulated] sim:echo hi from claude sdk"
    assert message.stop_reason == "end_turn" and message.model == "sim-gemini"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


async def test_anthropic_stream(claude: anthropic.AsyncAnthropic) -> None:
    async with claude.messages.stream(
        model="sim-gemini", max_tokens=50, messages=[{"role": "user", "content": "sim:tokens=5 go"}]
    ) as stream:
        texts = [t async for t in stream.text_stream]
        final = await stream.get_final_message()
    assert len(texts) > 1 and "".join(texts).startswith("[simulated]")
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 5


async def test_anthropic_tools_round_trip(claude: anthropic.AsyncAnthropic) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = await claude.messages.create(
        model="sim-gemini", max_tokens=100, tools=[ANTHROPIC_TOOL], messages=messages
    )  # type: ignore[arg-type]
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "get_weather" and "city" in use.input  # type: ignore[operator]
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "warm"}]},
    ]
    second = await claude.messages.create(
        model="sim-gemini", max_tokens=100, tools=[ANTHROPIC_TOOL], messages=messages
    )  # type: ignore[arg-type]
    assert second.stop_reason == "end_turn"
    assert "warm" in second.content[0].text  # type: ignore[union-attr]


async def test_anthropic_thinking_stream(claude: anthropic.AsyncAnthropic) -> None:
    async with claude.messages.stream(
        model="sim-gemini",
        max_tokens=3000,
        thinking={"type": "enabled", "budget_tokens": 1024},
        messages=[{"role": "user", "content": "Explain tides"}],
    ) as stream:
        final = await stream.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds[0] == "thinking" and "text" in kinds
