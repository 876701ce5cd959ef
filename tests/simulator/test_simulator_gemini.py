"""Gemini v1beta side of the simulator, exercised with the official ``google-genai`` SDK."""

from __future__ import annotations

import json
import math

import aiohttp
import pytest
from google import genai
from google.genai import errors, types

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    # google-genai subclasses aiohttp.ClientSession, which aiohttp 3.14 flags as deprecated
    pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning"),
]

KEY = {"x-goog-api-key": "sk-sim"}
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="weather",
    parameters=types.Schema(
        type=types.Type.OBJECT,
        properties={
            "city": types.Schema(type=types.Type.STRING),
            "days": types.Schema(type=types.Type.INTEGER),
        },
        required=["city"],
    ),
)


async def test_generate_plain(gem: genai.Client) -> None:
    r = await gem.aio.models.generate_content(model="gemini-sim", contents="Write about tides")
    assert r.text.startswith("[simulated] ")
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    u = r.usage_metadata
    assert 20 <= u.candidates_token_count <= 60
    assert u.total_token_count == u.prompt_token_count + u.candidates_token_count
    again = await gem.aio.models.generate_content(model="gemini-sim", contents="Write about tides")
    assert again.text == r.text
    capped = await gem.aio.models.generate_content(
        model="gemini-sim",
        contents="Write about tides",
        config=types.GenerateContentConfig(max_output_tokens=4, system_instruction="be brief"),
    )
    assert capped.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert capped.usage_metadata.candidates_token_count == 4
    stopped = await gem.aio.models.generate_content(
        model="gemini-sim",
        contents="red green blue sim:echo",
        config=types.GenerateContentConfig(stop_sequences=["blue"]),
    )
    assert stopped.text == "[simulated] red green " and stopped.candidates[0].finish_reason == "STOP"


async def test_generate_stream(gem: genai.Client) -> None:
    chunks = [
        c
        async for c in await gem.aio.models.generate_content_stream(
            model="gemini-sim", contents="hi sim:tokens=5"
        )
    ]
    assert len(chunks) == 5
    assert "".join(c.text for c in chunks).startswith("[simulated] ")
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count == 5


async def test_stream_without_sse_is_json_array(http: aiohttp.ClientSession, base_url: str) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi sim:tokens=3"}]}]}
    async with http.post(
        f"{base_url}/v1beta/models/gemini-sim:streamGenerateContent", json=body, headers=KEY
    ) as r:
        assert r.content_type == "application/json"
        raw = await r.text()
    items = json.loads(raw)
    assert len(items) == 3 and ",\r\n" in raw and items[-1]["candidates"][0]["finishReason"] == "STOP"
    # also served under /v1/models and with ?key=
    async with http.post(f"{base_url}/v1/models/gemini-sim:generateContent?key=k", json=body) as r:
        assert r.status == 200


async def test_function_calling(gem: genai.Client) -> None:
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[WEATHER])])
    r = await gem.aio.models.generate_content(model="gemini-sim", contents="weather in Paris?", config=config)
    call = r.function_calls[0]
    assert call.name == "get_weather" and call.args == {"city": "sim", "days": 1} and call.id
    history = [
        types.Content(role="user", parts=[types.Part(text="weather in Paris?")]),
        types.Content(role="model", parts=[types.Part(function_call=call)]),
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"result": "rainy"})],
        ),
    ]
    r2 = await gem.aio.models.generate_content(model="gemini-sim", contents=history, config=config)
    assert "tool said: rainy" in r2.text


async def test_thinking(gem: genai.Client) -> None:
    config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=True))
    r = await gem.aio.models.generate_content(model="gemini-sim", contents="think", config=config)
    parts = r.candidates[0].content.parts
    assert parts[0].thought is True and parts[0].text.startswith("[simulated reasoning]")
    assert not parts[1].thought and parts[1].text.startswith("[simulated]")
    u = r.usage_metadata
    assert u.thoughts_token_count > 0
    assert u.total_token_count == u.prompt_token_count + u.candidates_token_count + u.thoughts_token_count


async def test_embeddings(gem: genai.Client, http: aiohttp.ClientSession, base_url: str) -> None:
    r = await gem.aio.models.embed_content(model="text-embedding-004", contents=["alpha", "beta"])
    assert len(r.embeddings) == 2 and len(r.embeddings[0].values) == 768
    assert math.isclose(sum(v * v for v in r.embeddings[0].values), 1.0, rel_tol=1e-6)
    small = await gem.aio.models.embed_content(
        model="text-embedding-004",
        contents="alpha",
        config=types.EmbedContentConfig(output_dimensionality=64, task_type="RETRIEVAL_QUERY"),
    )
    assert len(small.embeddings[0].values) == 64
    body = {"content": {"parts": [{"text": "alpha"}]}, "taskType": "RETRIEVAL_DOCUMENT"}
    async with http.post(
        f"{base_url}/v1beta/models/text-embedding-004:embedContent", json=body, headers=KEY
    ) as r1:
        single = (await r1.json())["embedding"]["values"]
    assert single == pytest.approx(r.embeddings[0].values)


async def test_models_and_errors(gem: genai.Client, http: aiohttp.ClientSession, base_url: str) -> None:
    names = [m.name async for m in await gem.aio.models.list()]
    assert "models/gemini-sim" in names
    async with http.get(f"{base_url}/v1beta/models") as r:
        assert r.status == 401
        err = (await r.json())["error"]
    assert err["code"] == 401 and err["status"] == "UNAUTHENTICATED"
    async with http.post(f"{base_url}/v1beta/models/gemini-sim:generateContent", json={}, headers=KEY) as r:
        assert r.status == 400 and (await r.json())["error"]["status"] == "INVALID_ARGUMENT"
    with pytest.raises(errors.ServerError) as exc:
        await gem.aio.models.generate_content(model="gemini-sim-fail503", contents="hi")
    assert exc.value.code == 503 and exc.value.status == "UNAVAILABLE"
