"""OpenAI side of the simulator, exercised with the official ``openai`` SDK."""

from __future__ import annotations

import base64
import json
import math
import struct

import aiohttp
import openai
import pytest

pytestmark = pytest.mark.asyncio(loop_scope="session")

USER = [{"role": "user", "content": "Tell me about routers please"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
            },
            "required": ["city"],
        },
    },
}


async def test_chat_plain_usage_and_determinism(oai: openai.AsyncOpenAI) -> None:
    a = await oai.chat.completions.create(model="gpt-sim", messages=USER)
    b = await oai.chat.completions.create(model="gpt-sim", messages=USER)
    text = a.choices[0].message.content
    assert text is not None and text.startswith("[simulated] ")
    assert text == b.choices[0].message.content
    assert a.object == "chat.completion" and a.choices[0].finish_reason == "stop"
    assert 20 <= a.usage.completion_tokens <= 60
    assert a.usage.total_tokens == a.usage.prompt_tokens + a.usage.completion_tokens
    assert a.usage.prompt_tokens_details.cached_tokens == 0
    assert a.usage.completion_tokens_details.reasoning_tokens == 0
    other = await oai.chat.completions.create(model="gpt-sim-mini", messages=USER)
    assert other.choices[0].message.content != text


async def test_chat_directives_max_tokens_and_stop(oai: openai.AsyncOpenAI) -> None:
    r = await oai.chat.completions.create(
        model="gpt-sim", messages=[{"role": "user", "content": "x sim:tokens=7"}]
    )
    assert r.usage.completion_tokens == 7 and len(r.choices[0].message.content.split()) == 7
    r = await oai.chat.completions.create(
        model="gpt-sim", messages=[{"role": "user", "content": "x sim:tokens=30"}], max_completion_tokens=5
    )
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    r = await oai.chat.completions.create(
        model="gpt-sim", messages=[{"role": "user", "content": "hello sim:echo"}], max_tokens=50
    )
    assert r.choices[0].message.content == "[simulated] hello sim:echo"
    r = await oai.chat.completions.create(
        model="gpt-sim",
        messages=[{"role": "user", "content": "alpha beta STOP gamma sim:echo"}],
        stop=["STOP"],
    )
    assert r.choices[0].message.content == "[simulated] alpha beta " and r.choices[0].finish_reason == "stop"


async def test_chat_stream_usage_only_with_include_usage(oai: openai.AsyncOpenAI) -> None:
    msgs = [{"role": "user", "content": "stream it sim:tokens=6"}]
    chunks = [c async for c in await oai.chat.completions.create(model="gpt-sim", messages=msgs, stream=True)]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert len(chunks) == 6 and text.startswith("[simulated] ")
    stream = await oai.chat.completions.create(
        model="gpt-sim", messages=msgs, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text


async def test_chat_tools_call_and_result(oai: openai.AsyncOpenAI) -> None:
    r = await oai.chat.completions.create(model="gpt-sim", messages=USER, tools=[WEATHER_TOOL])
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "sim", "days": 1, "metric": True}
    follow = [
        *USER,
        {"role": "assistant", "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny and 21C"},
    ]
    r2 = await oai.chat.completions.create(model="gpt-sim", messages=follow, tools=[WEATHER_TOOL])
    assert "tool said: sunny and 21C" in r2.choices[0].message.content
    none = await oai.chat.completions.create(
        model="gpt-sim", messages=USER, tools=[WEATHER_TOOL], tool_choice="none"
    )
    assert none.choices[0].message.tool_calls is None
    # streamed tool call deltas reassemble into the same arguments
    stream = await oai.chat.completions.create(
        model="gpt-sim", messages=USER, tools=[WEATHER_TOOL], stream=True
    )
    chunks = [c async for c in stream]
    first = chunks[0].choices[0].delta.tool_calls[0]
    assert first.id == call.id and first.function.name == "get_weather" and first.function.arguments == ""
    args = "".join(c.choices[0].delta.tool_calls[0].function.arguments for c in chunks)
    assert json.loads(args) == json.loads(call.function.arguments)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_chat_reasoning(oai: openai.AsyncOpenAI) -> None:
    r = await oai.chat.completions.create(model="o-sim-reasoning", messages=USER, reasoning_effort="low")
    raw = r.choices[0].message.model_dump()
    assert raw["reasoning_content"].startswith("[simulated reasoning]")
    details = r.usage.completion_tokens_details
    assert details.reasoning_tokens > 0 and r.usage.completion_tokens > details.reasoning_tokens
    stream = await oai.chat.completions.create(
        model="o-sim-reasoning", messages=USER, reasoning_effort="low", stream=True
    )
    chunks = [c.choices[0].delta.model_dump() async for c in stream]
    assert "".join(c.get("reasoning_content") or "" for c in chunks) == raw["reasoning_content"]


async def test_legacy_completions(oai: openai.AsyncOpenAI) -> None:
    r = await oai.completions.create(model="gpt-sim", prompt="Once upon sim:tokens=4")
    assert r.object == "text_completion" and r.choices[0].text.startswith("[simulated]")
    assert r.usage.completion_tokens == 4
    stream = await oai.completions.create(
        model="gpt-sim", prompt="Once upon sim:tokens=4", stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text
    assert chunks[-1].usage.completion_tokens == 4


async def test_embeddings_float_base64_dimensions(
    oai: openai.AsyncOpenAI, http: aiohttp.ClientSession, base_url: str
) -> None:
    r = await oai.embeddings.create(
        model="text-embedding-3-small", input=["hello", "world"], encoding_format="float"
    )
    assert len(r.data) == 2 and len(r.data[0].embedding) == 1536
    assert math.isclose(sum(v * v for v in r.data[0].embedding), 1.0, rel_tol=1e-6)
    assert r.usage.prompt_tokens == 4 and r.usage.total_tokens == 4  # ceil(5 / 4) each
    big = await oai.embeddings.create(model="text-embedding-3-large", input="hello", encoding_format="float")
    assert len(big.data[0].embedding) == 3072
    # the SDK asks for base64 by default and decodes it itself
    sdk_b64 = await oai.embeddings.create(model="text-embedding-3-small", input="hello")
    assert sdk_b64.data[0].embedding == pytest.approx(r.data[0].embedding, abs=1e-6)
    small = await oai.embeddings.create(model="text-embedding-3-small", input="hello", dimensions=256)
    assert len(small.data[0].embedding) == 256
    assert math.isclose(sum(v * v for v in small.data[0].embedding), 1.0, rel_tol=1e-6)
    async with http.post(
        f"{base_url}/v1/embeddings",
        json={"model": "text-embedding-ada-002", "input": "hello", "encoding_format": "base64"},
        headers={"Authorization": "Bearer sk-sim"},
    ) as resp:
        b64 = (await resp.json())["data"][0]["embedding"]
    decoded = struct.unpack("<1536f", base64.b64decode(b64))
    assert decoded == pytest.approx(r.data[0].embedding, abs=1e-6)


async def test_models_and_errors(oai: openai.AsyncOpenAI, base_url: str) -> None:
    models = await oai.models.list()
    assert "gpt-sim" in [m.id for m in models.data]
    assert (await oai.models.retrieve("gpt-sim")).id == "gpt-sim"
    with pytest.raises(openai.BadRequestError) as exc:
        await oai.chat.completions.create(model="gpt-sim", messages=[])
    assert exc.value.body["type"] == "invalid_request_error"
    bad = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-sim-fail503", max_retries=0)
    with pytest.raises(openai.InternalServerError) as exc5:
        await bad.chat.completions.create(model="gpt-sim", messages=USER)
    assert exc5.value.status_code == 503 and exc5.value.body["message"] == "simulated failure"
    await bad.close()
    with pytest.raises(openai.InternalServerError):
        await oai.chat.completions.create(model="gpt-sim-fail500", messages=USER)
