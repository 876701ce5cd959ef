"""The plugin's ``ollama`` upstream protocol: the official openai and anthropic SDKs on a model served
by an Ollama upstream (the simulator's Ollama side, added by the plugin), whole and streamed, with
tools and embeddings; and the ollama client on it (the same-format fast path, model aliasing)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import anthropic
import ollama
import openai
import pytest_asyncio

from tests.plugins.ollama_support import OLLAMA_MODELS, OllamaGateway, ollama_upstream

OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Current weather of a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"]}},
}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Current weather of a city",
                  "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                   "required": ["city"]}}


@pytest_asyncio.fixture
async def oai(ollama_gw: OllamaGateway) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(base_url=ollama_gw.base_url + "/v1", api_key=ollama_gw.key, max_retries=0)
    yield sdk
    await sdk.close()


@pytest_asyncio.fixture
async def claude(ollama_gw: OllamaGateway) -> AsyncIterator[anthropic.AsyncAnthropic]:
    sdk = anthropic.AsyncAnthropic(base_url=ollama_gw.base_url, api_key=ollama_gw.key, max_retries=0)
    yield sdk
    await sdk.close()


async def upstream_body(ollama_gw: OllamaGateway, marker: str) -> dict[str, Any]:
    """The JSON body the Ollama upstream received for the request whose prompt holds ``marker``."""
    async with aiohttp.ClientSession() as http, http.get(ollama_gw.sim.base_url + "/_sim/requests") as resp:
        entries = await resp.json()
    found = [e for e in entries if marker in json.dumps(e["body_json_or_null"])]
    assert len(found) == 1, f"{len(found)} upstream requests hold {marker!r}"
    assert found[0]["headers"]["authorization"] == "Bearer sk-sim"  # the upstream's key, not the client's
    body: dict[str, Any] = found[0]["body_json_or_null"]
    body["_path"] = found[0]["path"]
    return body


# --- openai -------------------------------------------------------------------------------------


async def test_openai_chat(oai: openai.AsyncOpenAI, ollama_gw: OllamaGateway) -> None:
    marker = uuid.uuid4().hex
    completion = await oai.chat.completions.create(
        model="sim-llama", max_tokens=50, temperature=0.3, stop=["zzz"],
        messages=[{"role": "system", "content": "Be terse."},
                  {"role": "user", "content": f"sim:echo {marker}"}])
    choice = completion.choices[0]
    assert choice.message.content == f"[simulated] sim:echo {marker}"
    assert choice.finish_reason == "stop" and completion.model == "sim-llama"
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert completion.usage.completion_tokens == len(choice.message.content.split())
    sent = await upstream_body(ollama_gw, marker)
    assert sent["_path"] == "/api/chat" and sent["stream"] is False
    assert sent["messages"][0] == {"role": "system", "content": "Be terse."}
    assert sent["options"] == {"temperature": 0.3, "num_predict": 50, "stop": ["zzz"]}


async def test_openai_length(oai: openai.AsyncOpenAI) -> None:
    completion = await oai.chat.completions.create(
        model="sim-llama", max_tokens=3, messages=[{"role": "user", "content": "sim:tokens=20 go"}])
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 3


async def test_openai_stream(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.chat.completions.create(
        model="sim-llama", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "sim:tokens=6 go"}])
    texts: list[str] = []
    finish = None
    usage = None
    async for chunk in stream:
        if chunk.choices:
            texts.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert len([t for t in texts if t]) == 6 and "".join(texts).startswith("[simulated]")
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens == 6 and usage.prompt_tokens > 0


async def test_openai_tools(oai: openai.AsyncOpenAI) -> None:
    first = await oai.chat.completions.create(
        model="sim-llama", tools=[OPENAI_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "Weather in Rome?"}])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]  # type: ignore[index]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "sim"}
    second = await oai.chat.completions.create(
        model="sim-llama", tools=[OPENAI_TOOL],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "Weather in Rome?"},
                  choice.message.model_dump(exclude_none=True),  # type: ignore[list-item]
                  {"role": "tool", "tool_call_id": call.id, "content": "cloudy"}])
    assert "cloudy" in (second.choices[0].message.content or "")


async def test_openai_embeddings(oai: openai.AsyncOpenAI) -> None:
    result = await oai.embeddings.create(model="sim-llama-embed", input=["one", "two"])
    assert len(result.data) == 2 and len(result.data[0].embedding) > 8
    assert result.usage.prompt_tokens == 2


# --- anthropic ----------------------------------------------------------------------------------


async def test_anthropic_message(claude: anthropic.AsyncAnthropic) -> None:
    message = await claude.messages.create(
        model="sim-llama", max_tokens=100, system="Be terse.",
        messages=[{"role": "user", "content": "sim:echo hi llama"}])
    assert message.content[0].type == "text" and message.content[0].text == "[simulated] sim:echo hi llama"
    assert message.stop_reason == "end_turn" and message.model == "sim-llama"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens == 4  # one per word


async def test_anthropic_stream(claude: anthropic.AsyncAnthropic) -> None:
    async with claude.messages.stream(model="sim-llama", max_tokens=100,
                                      messages=[{"role": "user", "content": "sim:tokens=7 go"}]) as stream:
        deltas = [e async for e in stream if e.type == "content_block_delta"]
        final = await stream.get_final_message()
    assert len(deltas) == 7
    assert final.content[0].type == "text" and final.content[0].text.startswith("[simulated]")
    assert final.stop_reason == "end_turn" and final.usage.output_tokens == 7


async def test_anthropic_stream_tool_use_and_thinking(claude: anthropic.AsyncAnthropic) -> None:
    async with claude.messages.stream(
            model="sim-llama", max_tokens=2000, tools=[ANTHROPIC_TOOL],  # type: ignore[list-item]
            thinking={"type": "enabled", "budget_tokens": 1024},
            messages=[{"role": "user", "content": "Weather in Lima?"}]) as stream:
        final = await stream.get_final_message()
    kinds = [block.type for block in final.content]
    assert kinds == ["thinking", "tool_use"]
    tool = final.content[1]
    assert tool.type == "tool_use" and tool.name == "get_weather" and tool.input == {"city": "sim"}
    assert final.stop_reason == "tool_use"


# --- ollama on ollama: the fast path --------------------------------------------------------------


async def test_ollama_client_fast_path_with_alias(ollama_gw: OllamaGateway) -> None:
    marker = uuid.uuid4().hex
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": f"Bearer {ollama_gw.key}"})
    try:
        whole = await sdk.chat(model="sim-llama-alias", options={"num_ctx": 4096},
                               messages=[{"role": "user", "content": f"sim:echo {marker}"}])
        chunks = [c async for c in await sdk.chat(model="sim-llama-alias", stream=True,
                                                   messages=[{"role": "user", "content": "sim:tokens=4 s"}])]
    finally:
        await sdk.close()
    assert whole.message.content == f"[simulated] sim:echo {marker}" and whole.model == "sim-llama-alias"
    sent = await upstream_body(ollama_gw, marker)
    # The client's bytes went up as they were (options unknown to other formats kept), model aliased.
    assert sent["model"] == "llama-upstream-name" and sent["options"] == {"num_ctx": 4096}
    assert all(c.model == "sim-llama-alias" for c in chunks)
    assert chunks[-1].done and chunks[-1].eval_count == 4


async def test_a_local_ollama_needs_no_key(gateway_server: Any, make_config: Any, ollama_sim: Any) -> None:
    """``api_key: ""`` (a local Ollama has no authentication): no Authorization header goes up."""
    upstream = {**ollama_upstream(ollama_sim.base_url, api_key=""), "models": ["sim-llama"]}
    handle = await gateway_server(make_config(extra_models=OLLAMA_MODELS, extra_upstreams=[upstream]),
                                  load_entrypoints=True)
    user = await handle.create_user("local")
    key = (await handle.create_key(user["id"]))["key"]
    marker = uuid.uuid4().hex
    reply = await handle.request("POST", "/v1/chat/completions", key=key, json={
        "model": "sim-llama", "messages": [{"role": "user", "content": f"sim:echo {marker}"}]})
    assert reply.status == 200, reply.text
    async with aiohttp.ClientSession() as http, http.get(ollama_sim.base_url + "/_sim/requests") as resp:
        (entry,) = [e for e in await resp.json() if marker in json.dumps(e["body_json_or_null"])]
    assert "authorization" not in entry["headers"]


async def test_ollama_client_embeddings_on_an_ollama_upstream(ollama_gw: OllamaGateway) -> None:
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": f"Bearer {ollama_gw.key}"})
    try:
        batch = await sdk.embed(model="sim-llama-embed", input=["red", "blue"], dimensions=16)
        legacy = await sdk.embeddings(model="sim-llama-embed", prompt="red")
    finally:
        await sdk.close()
    assert batch.model == "sim-llama-embed" and [len(v) for v in batch.embeddings] == [16, 16]
    assert batch.prompt_eval_count == 2  # one token each, as the upstream counted
    # the older endpoint goes up as /api/embed too, without `dimensions`: the model's own size
    assert len(legacy.embedding) > 16 and legacy.embedding[:3] != batch.embeddings[0][:3]


async def test_openai_image_data_url_as_base64(oai: openai.AsyncOpenAI, ollama_gw: OllamaGateway) -> None:
    marker = uuid.uuid4().hex
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    await oai.chat.completions.create(model="sim-llama", messages=[{"role": "user", "content": [
        {"type": "text", "text": marker},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}]}])
    sent = await upstream_body(ollama_gw, marker)
    assert sent["messages"] == [{"role": "user", "content": marker, "images": [png]}]
