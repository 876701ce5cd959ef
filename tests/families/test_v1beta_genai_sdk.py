"""End to end with the official ``google-genai`` SDK against the gateway's v1beta family.

The same calls run on a v1beta upstream (same-format fast path, plain and aliased) and, translated,
on chat and messages upstreams (models routed to those simulator upstreams).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import pytest_asyncio
from google import genai
from google.genai import errors, types

pytestmark = [
    # google-genai subclasses aiohttp.ClientSession, which recent aiohttp flags as deprecated
    pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning"),
]

TEXT_MODELS = ["sim-gemini", "gem-alias", "gem-via-chat", "gem-via-claude"]
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Current weather of a city",
    parameters=types.Schema(
        type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}, required=["city"]
    ),
)
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)


@dataclass
class Env:
    base_url: str
    key: str
    handle: Any


@pytest_asyncio.fixture
async def env(gateway_server: Any, make_config: Any, simulator: Any) -> Env:
    base = simulator.base_url
    price = {"input_per_mtok": 1, "output_per_mtok": 2}
    config = make_config(
        extra_models=[
            {"id": m, "price": price}
            for m in ("gem-alias", "gem-via-chat", "gem-via-claude", "embed-via-chat", "gem-embed-alias")
        ],
        extra_upstreams=[
            {
                "name": "sim-google-alias",
                "protocol": "v1beta",
                "base_url": base,
                "api_key": "sk-sim",
                "models": {"gem-alias": "sim-gemini", "gem-embed-alias": "sim-gemini-embed"},
            },
            {
                "name": "sim-openai-gem",
                "protocol": "chat",
                "base_url": base,
                "api_key": "sk-sim",
                "models": {"gem-via-chat": "sim-chat", "embed-via-chat": "sim-embed"},
            },
            {
                "name": "sim-anthropic-gem",
                "protocol": "messages",
                "base_url": base,
                "api_key": "sk-sim",
                "models": {"gem-via-claude": "sim-claude"},
            },
        ],
    )
    handle = await gateway_server(config)
    user = await handle.create_user("g", quota_usd=100)
    key = (await handle.create_key(user["id"], name="genai"))["key"]
    return Env(handle.base_url, key, handle)


@pytest_asyncio.fixture
async def client(env: Env) -> AsyncIterator[genai.Client]:
    sdk = genai.Client(
        api_key=env.key, http_options=types.HttpOptions(base_url=env.base_url, api_version="v1beta")
    )
    yield sdk
    await sdk.aio.aclose()


@pytest.mark.parametrize("model", TEXT_MODELS)
async def test_generate(client: genai.Client, model: str) -> None:
    r = await client.aio.models.generate_content(
        model=model,
        contents="sim:echo hello there",
        config=types.GenerateContentConfig(
            system_instruction="Be terse.", max_output_tokens=60, temperature=0.3
        ),
    )
    assert r.text == "[simulated] sim:echo hello there"
    assert r.candidates[0].finish_reason == types.FinishReason.STOP
    u = r.usage_metadata
    assert u.prompt_token_count > 0 and u.candidates_token_count > 0
    assert u.total_token_count == u.prompt_token_count + u.candidates_token_count


@pytest.mark.parametrize("model", TEXT_MODELS)
async def test_max_tokens(client: genai.Client, model: str) -> None:
    r = await client.aio.models.generate_content(
        model=model, contents="sim:tokens=30 go", config=types.GenerateContentConfig(max_output_tokens=4)
    )
    assert r.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert r.usage_metadata.candidates_token_count == 4


@pytest.mark.parametrize("model", TEXT_MODELS)
async def test_stream_sse(client: genai.Client, model: str) -> None:
    chunks = [
        c
        async for c in await client.aio.models.generate_content_stream(
            model=model, contents="sim:tokens=9 go"
        )
    ]
    assert len(chunks) > 1
    text = "".join(c.text or "" for c in chunks)
    assert text.startswith("[simulated]")
    last = chunks[-1]
    assert last.candidates[0].finish_reason == types.FinishReason.STOP
    assert last.usage_metadata.candidates_token_count == 9 and last.usage_metadata.prompt_token_count > 0


@pytest.mark.parametrize("model", TEXT_MODELS)
async def test_stream_json_array(env: Env, model: str) -> None:
    """Without ``alt=sse`` the stream is one JSON array, sent incrementally."""
    body = {"contents": [{"role": "user", "parts": [{"text": "sim:tokens=6 go"}]}]}
    reply = await env.handle.request(
        "POST",
        f"/v1beta/models/{model}:streamGenerateContent",
        json=body,
        headers={"x-goog-api-key": env.key},
    )
    assert reply.status == 200, reply.text
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.body.startswith(b"[") and reply.body.rstrip().endswith(b"]")
    chunks = orjson.loads(reply.body)
    assert len(chunks) > 1
    text = "".join(
        p.get("text", "")
        for c in chunks
        for cand in c["candidates"]
        for p in cand.get("content", {}).get("parts", [])
    )
    assert text.startswith("[simulated]")
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 6


@pytest.mark.parametrize("model", TEXT_MODELS)
async def test_function_calling_round_trip(client: genai.Client, model: str) -> None:
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])], automatic_function_calling=NO_AFC
    )
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])]
    first = await client.aio.models.generate_content(model=model, contents=contents, config=config)
    assert first.candidates[0].finish_reason == types.FinishReason.STOP
    (call,) = first.function_calls or []
    assert call.name == "get_weather" and "city" in (call.args or {})
    assert call.id  # ids stay stable across the round trip, whichever upstream made them
    contents.append(first.candidates[0].content)
    contents.append(
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call.id, name="get_weather", response={"result": "-3C, snow"}
                    )
                )
            ],
        )
    )
    second = await client.aio.models.generate_content(model=model, contents=contents, config=config)
    assert not second.function_calls
    assert "-3C, snow" in (second.text or "")


@pytest.mark.parametrize("model", ["gem-via-chat", "gem-via-claude"])
async def test_function_response_without_id(client: genai.Client, model: str) -> None:
    """Gemini clients often leave ids out: the gateway pairs the response with its call by name."""
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])], automatic_function_calling=NO_AFC
    )
    contents = [
        types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")]),
        types.Content(
            role="model",
            parts=[types.Part(function_call=types.FunctionCall(name="get_weather", args={"city": "Oslo"}))],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(name="get_weather", response={"result": "mild"})
                )
            ],
        ),
    ]
    r = await client.aio.models.generate_content(model=model, contents=contents, config=config)
    assert "mild" in (r.text or "")


@pytest.mark.parametrize("model", ["sim-gemini", "gem-via-claude"])
async def test_thinking(client: genai.Client, model: str) -> None:
    config = types.GenerateContentConfig(
        max_output_tokens=2000,
        thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True),
    )
    r = await client.aio.models.generate_content(model=model, contents="Explain tides", config=config)
    parts = r.candidates[0].content.parts
    assert parts[0].thought and parts[0].text
    assert any(not p.thought and p.text for p in parts)
    if model == "sim-gemini":  # the message protocol reports no separate thinking count
        assert (r.usage_metadata.thoughts_token_count or 0) > 0
    streamed = [
        c
        async for c in await client.aio.models.generate_content_stream(
            model=model, contents="Explain tides", config=config
        )
    ]
    assert any(p.thought for c in streamed for p in (c.candidates[0].content.parts or []))


async def test_thinking_tool_loop_keeps_signatures(client: genai.Client) -> None:
    """A thought signature made by the message-protocol upstream comes back to it unchanged."""
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        automatic_function_calling=NO_AFC,
        thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True),
        max_output_tokens=2000,
    )
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])]
    first = await client.aio.models.generate_content(model="gem-via-claude", contents=contents, config=config)
    signed = [p for p in first.candidates[0].content.parts if p.thought_signature]
    assert signed
    (call,) = first.function_calls or []
    assert call.name == "get_weather"
    contents += [
        first.candidates[0].content,
        types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="get_weather", response={"result": "sunny"})],
        ),
    ]
    second = await client.aio.models.generate_content(
        model="gem-via-claude", contents=contents, config=config
    )
    assert "sunny" in (second.text or "")


@pytest.mark.parametrize("model", ["sim-gemini-embed", "gem-embed-alias", "embed-via-chat"])
async def test_embed(client: genai.Client, model: str) -> None:
    one = await client.aio.models.embed_content(model=model, contents="hello world")
    assert len(one.embeddings) == 1 and len(one.embeddings[0].values) > 8
    batch = await client.aio.models.embed_content(
        model=model,
        contents=[types.Content(parts=[types.Part(text="a")]), types.Content(parts=[types.Part(text="b")])],
        config=types.EmbedContentConfig(task_type="SEMANTIC_SIMILARITY", output_dimensionality=16),
    )
    assert len(batch.embeddings) == 2 and all(len(e.values) == 16 for e in batch.embeddings)
    assert batch.embeddings[0].values != batch.embeddings[1].values


async def test_embed_content_endpoint(env: Env) -> None:
    """``:embedContent`` (what older clients call) and the title rule of spec 4.8."""
    headers = {"x-vendorc-api-key": env.key}
    ok = await env.handle.request(
        "POST",
        "/v1beta/models/sim-gemini-embed:embedContent",
        headers=headers,
        json={"content": {"parts": [{"text": "doc"}]}, "taskType": "RETRIEVAL_DOCUMENT", "title": "T"},
    )
    assert ok.status == 200, ok.text
    assert len(ok.json()["embedding"]["values"]) > 8
    bad = await env.handle.request(
        "POST",
        "/v1beta/models/sim-gemini-embed:embedContent",
        headers=headers,
        json={"content": {"parts": [{"text": "q"}]}, "title": "T"},
    )
    assert bad.status == 400
    err = bad.json()["error"]
    assert err["status"] == "INVALID_ARGUMENT" and "title" in err["message"]
    assert err["details"][0]["reason"] == "invalid_request"


async def test_default_api_version_uses_v1_prefix(env: Env) -> None:
    sdk = genai.Client(api_key=env.key, http_options=types.HttpOptions(base_url=env.base_url))
    try:
        r = await sdk.aio.models.generate_content(model="sim-gemini", contents="sim:echo via v1")
        assert r.text == "[simulated] sim:echo via v1"
        chunks = [
            c
            async for c in await sdk.aio.models.generate_content_stream(
                model="gem-via-chat", contents="sim:tokens=3 x"
            )
        ]
        assert chunks[-1].usage_metadata.candidates_token_count == 3
        e = await sdk.aio.models.embed_content(model="sim-gemini-embed", contents="x")
        assert e.embeddings and e.embeddings[0].values
    finally:
        await sdk.aio.aclose()


async def test_models_list_and_get(client: genai.Client, env: Env) -> None:
    names = [m.name async for m in await client.aio.models.list()]
    assert "models/sim-gemini" in names and "models/sim-chat" in names
    model = await client.aio.models.get(model="sim-gemini-embed")
    assert model.name == "models/sim-gemini-embed"
    assert "embedContent" in (model.supported_actions or [])
    with pytest.raises(errors.ClientError) as info:
        await client.aio.models.get(model="no-such-model")
    assert info.value.code == 404 and info.value.status == "NOT_FOUND"

    # a key limited to one model sees only that one, and the others read as absent
    limited = (await env.handle.create_key((await env.handle.create_user("l"))["id"], models=["sim-gemini"]))[
        "key"
    ]
    headers = {"x-goog-api-key": limited}
    listed = await env.handle.request("GET", "/v1beta/models", headers=headers)
    assert [m["name"] for m in listed.json()["models"]] == ["models/sim-gemini"]
    hidden = await env.handle.request("GET", "/v1beta/models/sim-claude", headers=headers)
    assert hidden.status == 404 and hidden.json()["error"]["status"] == "NOT_FOUND"
    paged = await env.handle.request(
        "GET", "/v1beta/models", headers={"x-goog-api-key": env.key}, params={"pageSize": "2"}
    )
    assert len(paged.json()["models"]) == 2 and paged.json()["nextPageToken"] == "2"


async def test_count_tokens(client: genai.Client) -> None:
    r = await client.aio.models.count_tokens(model="sim-gemini", contents="how many tokens is this")
    assert r.total_tokens and r.total_tokens > 0


async def test_query_key_auth_is_never_logged(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    body = {"contents": [{"parts": [{"text": "sim:echo q"}]}]}
    with caplog.at_level(logging.INFO):
        reply = await env.handle.request(
            "POST", "/v1beta/models/sim-gemini:generateContent", json=body, params={"key": env.key}
        )
        bad = await env.handle.request(
            "POST", "/v1beta/models/sim-gemini:generateContent", json=body, params={"key": env.key + "x"}
        )
    assert reply.status == 200, reply.text
    assert reply.json()["candidates"][0]["content"]["parts"][0]["text"] == "[simulated] sim:echo q"
    assert bad.status == 401 and bad.json()["error"]["status"] == "UNAUTHENTICATED"
    assert env.key not in bad.text
    access = [r for r in caplog.records if r.name == "gateway.access"]
    assert access, "no access log line was written"
    assert any("generateContent" in r.getMessage() for r in access)
    for record in caplog.records:
        assert env.key not in record.getMessage()
        assert env.key[8:] not in record.getMessage()


async def test_errors_in_v1beta_envelope(env: Env) -> None:
    headers = {"x-goog-api-key": env.key}
    missing = await env.handle.request(
        "POST", "/v1beta/models/sim-gemini:generateContent", json={"contents": [{"parts": [{"text": "x"}]}]}
    )
    assert missing.status == 401 and missing.json()["error"]["details"][0]["reason"] == "invalid_api_key"
    # (translated: on the fast path the v1beta upstream itself validates the body)
    bad = await env.handle.request(
        "POST",
        "/v1beta/models/gem-via-chat:generateContent",
        headers=headers,
        json={"contents": [{"role": "robot", "parts": [{"text": "x"}]}]},
    )
    assert bad.status == 400 and "contents[0].role" in bad.json()["error"]["message"]
    garbage = await env.handle.request(
        "POST", "/v1beta/models/sim-gemini:generateContent", headers=headers, data=b"{not json"
    )
    assert garbage.status == 400 and garbage.json()["error"]["status"] == "INVALID_ARGUMENT"
    unknown = await env.handle.request("POST", "/v1beta/models/sim-gemini:fooBar", headers=headers, json={})
    assert unknown.status == 404 and unknown.json()["error"]["status"] == "NOT_FOUND"
    nowhere = await env.handle.request(
        "POST", "/v1beta/tunedModels/x:generateContent", headers=headers, json={}
    )
    assert nowhere.status == 404 and "error" in nowhere.json()
    no_model = await env.handle.request(
        "POST",
        "/v1beta/models/nope:generateContent",
        headers=headers,
        json={"contents": [{"parts": [{"text": "x"}]}]},
    )
    assert no_model.status == 404 and no_model.json()["error"]["details"][0]["reason"] == "model_not_found"
    on_v1 = await env.handle.request(
        "POST", "/v1/models/gem-via-claude:generateContent", headers=headers, json={"contents": []}
    )
    assert on_v1.status == 400 and on_v1.json()["error"]["code"] == 400
