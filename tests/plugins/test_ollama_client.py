"""The official ``ollama`` Python client, unmodified but for its host and key, through the gateway:
chat, streamed chat, generate, embed, tools and thinking, against a chat, a messages and a v1beta
upstream (the plugin's Frontend decodes, the built-in adapters translate), and ``/api/tags``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import ollama
import orjson
import pytest
import pytest_asyncio

from tests.plugins.ollama_support import OllamaGateway

# chat, messages, v1beta upstreams: each test runs on the three with one gateway (starts are the cost)
TEXT_MODELS = ["sim-chat", "sim-claude", "sim-gemini"]
EMBED_MODELS = ["sim-embed", "sim-gemini-embed"]  # chat and v1beta upstreams
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest_asyncio.fixture
async def client(ollama_gw: OllamaGateway) -> AsyncIterator[ollama.AsyncClient]:
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": f"Bearer {ollama_gw.key}"})
    yield sdk
    await sdk.close()


async def test_chat(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        answer = await client.chat(model=model, messages=[
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "sim:echo hello from ollama"},
        ])
        assert answer.message.role == "assistant"
        assert answer.message.content == "[simulated] sim:echo hello from ollama"
        assert answer.done is True and answer.done_reason == "stop"
        assert answer.model == model
        assert answer.prompt_eval_count and answer.prompt_eval_count > 0
        assert answer.eval_count and answer.eval_count > 0


async def test_chat_stream(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        parts: list[str] = []
        last: Any = None
        async for chunk in await client.chat(model=model, stream=True,
                                             messages=[{"role": "user", "content": "sim:tokens=12 go"}]):
            parts.append(chunk.message.content or "")
            last = chunk
        assert len([p for p in parts if p]) > 1  # really streamed, piece by piece
        text = "".join(parts)
        assert text.startswith("[simulated]")
        assert last.done is True and last.done_reason == "stop"
        assert last.eval_count == 12 and last.prompt_eval_count > 0


async def test_num_predict_is_the_output_ceiling(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        answer = await client.chat(model=model, options={"num_predict": 3, "temperature": 0.1, "seed": 7},
                                   messages=[{"role": "user", "content": "sim:tokens=20 go"}])
        assert answer.done_reason == "length"
        assert answer.eval_count == 3


async def test_generate(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        answer = await client.generate(model=model, prompt="sim:echo generate me", system="Be terse.")
        assert answer.response == "[simulated] sim:echo generate me"
        assert answer.done is True and answer.eval_count and answer.eval_count > 0
        pieces = [c.response async for c in await client.generate(model=model, prompt="sim:tokens=5 x",
                                                                   stream=True)]
        assert "".join(pieces).startswith("[simulated]") and len([p for p in pieces if p]) == 5


async def test_tool_round_trip(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        first = await client.chat(model=model, tools=[WEATHER],
                                  messages=[{"role": "user", "content": "Weather in Paris?"}])
        calls = first.message.tool_calls
        assert calls and calls[0].function.name == "get_weather"
        assert calls[0].function.arguments == {"city": "sim"}
        second = await client.chat(model=model, tools=[WEATHER], messages=[
            {"role": "user", "content": "Weather in Paris?"},
            first.message,
            {"role": "tool", "content": "sunny, 21C", "tool_name": "get_weather"},
        ])
        assert "sunny, 21C" in (second.message.content or "")


async def test_streamed_tool_call(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        calls = []
        async for chunk in await client.chat(model=model, tools=[WEATHER], stream=True,
                                             messages=[{"role": "user", "content": "Weather in Oslo?"}]):
            calls.extend(chunk.message.tool_calls or [])
        assert [(c.function.name, c.function.arguments) for c in calls] == [("get_weather", {"city": "sim"})]


async def test_think(client: ollama.AsyncClient) -> None:
    for model in TEXT_MODELS:
        answer = await client.chat(model=model, think=True, options={"num_predict": 200},
                                   messages=[{"role": "user", "content": "sim:tokens=4 think first"}])
        assert answer.message.thinking and answer.message.thinking.startswith("[simulated reasoning]")
        assert answer.message.content and answer.message.content.startswith("[simulated]")


async def test_image_as_base64(client: ollama.AsyncClient) -> None:
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000")
    answer = await client.chat(model="sim-claude", messages=[
        {"role": "user", "content": "sim:echo what is this", "images": [png]}])
    assert answer.message.content == "[simulated] sim:echo what is this"
    assert answer.prompt_eval_count and answer.prompt_eval_count > 50  # the image was counted upstream


async def test_embed(client: ollama.AsyncClient) -> None:
    for model in EMBED_MODELS:
        answer = await client.embed(model=model, input=["first text", "second text"])
        assert len(answer.embeddings) == 2 and len(answer.embeddings[0]) > 8
        assert answer.embeddings[0] != answer.embeddings[1]
        single = await client.embed(model=model, input="first text")
        assert single.embeddings == [answer.embeddings[0]]
        legacy = await client.embeddings(model=model, prompt="first text")
        assert list(legacy.embedding) == answer.embeddings[0]


async def test_tags_lists_the_models_the_key_may_use(ollama_gw: OllamaGateway) -> None:
    gw = ollama_gw.gw
    limited = await gw.create_key(gw.user["id"], name="limited", models=["sim-chat", "sim-llama"])
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": f"Bearer {limited['key']}"})
    try:
        listed = await sdk.list()
    finally:
        await sdk.close()
    assert sorted(m.model or "" for m in listed.models) == ["sim-chat", "sim-llama"]


async def test_key_from_the_environment(ollama_gw: OllamaGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client reads OLLAMA_API_KEY (and OLLAMA_HOST) by itself: no argument at all."""
    monkeypatch.setenv("OLLAMA_API_KEY", ollama_gw.key)
    monkeypatch.setenv("OLLAMA_HOST", ollama_gw.base_url)
    sdk = ollama.AsyncClient()
    try:
        answer = await sdk.chat(model="sim-chat", messages=[{"role": "user", "content": "sim:echo env"}])
    finally:
        await sdk.close()
    assert answer.message.content == "[simulated] sim:echo env"


@pytest.mark.parametrize("model", ["sim-chat", "sim-llama"])  # translated, and Ollama to Ollama
async def test_stream_is_the_default(ollama_gw: OllamaGateway, model: str) -> None:
    """As in Ollama, a body without ``stream`` is answered with NDJSON lines."""
    reply = await ollama_gw.gw.request("POST", "/api/chat", key=ollama_gw.key, json={
        "model": model, "messages": [{"role": "user", "content": "sim:tokens=3 x"}]})
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [orjson.loads(line) for line in reply.body.splitlines()]
    assert [line["done"] for line in lines] == [False, False, False, True]
    assert all(line["model"] == model for line in lines) and lines[-1]["eval_count"] == 3
