"""What an Ollama client's request becomes on the other protocols' wires: the bodies the session
simulator's chat, messages and v1beta sides received (``GET /_sim/requests``)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import ollama
import pytest_asyncio

from tests.plugins.ollama_support import OllamaGateway

PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d49484452")).decode()


@pytest_asyncio.fixture
async def client(ollama_gw: OllamaGateway) -> AsyncIterator[ollama.AsyncClient]:
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": f"Bearer {ollama_gw.key}"})
    yield sdk
    await sdk.close()


async def received(simulator: Any, marker: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(simulator.base_url + "/_sim/requests") as resp:
        entries = await resp.json()
    found = [e for e in entries if marker in json.dumps(e["body_json_or_null"])]
    assert len(found) == 1
    body: dict[str, Any] = found[0]["body_json_or_null"]
    return body


async def test_options_format_and_think_on_chat(client: ollama.AsyncClient, simulator: Any) -> None:
    marker = uuid.uuid4().hex
    await client.chat(model="sim-chat", format="json", think="high",
                      options={"temperature": 0.4, "top_p": 0.9, "seed": 11, "stop": ["END"],
                               "num_predict": 64, "num_ctx": 8192},
                      messages=[{"role": "system", "content": "Answer in JSON."},
                                {"role": "user", "content": marker}])
    body = await received(simulator, marker)
    assert body["messages"][0] == {"role": "system", "content": "Answer in JSON."}
    assert (body["temperature"], body["top_p"], body["seed"], body["stop"]) == (0.4, 0.9, 11, ["END"])
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 64
    assert body["response_format"] == {"type": "json_object"} and body["reasoning_effort"] == "high"
    assert "num_ctx" not in json.dumps(body) and not body.get("stream")  # Ollama-only; not streamed


async def test_images_and_tool_rounds_on_messages(client: ollama.AsyncClient, simulator: Any) -> None:
    marker = uuid.uuid4().hex
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    await client.chat(model="sim-claude", tools=[{"type": "function", "function": {
        "name": "count", "description": "Count things", "parameters": schema}}], messages=[
        {"role": "user", "content": f"look {marker}", "images": [PNG]},
        {"role": "assistant", "content": "",
         "tool_calls": [{"function": {"name": "count", "arguments": {"n": 2}}}]},
        {"role": "tool", "content": "two", "tool_name": "count"},
    ])
    body = await received(simulator, marker)
    first, second, third = body["messages"]
    assert first["content"][0] == {"type": "image",
                                   "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    call = second["content"][0]
    assert call["type"] == "tool_use" and call["name"] == "count" and call["input"] == {"n": 2}
    result = third["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == call["id"]
    assert body["tools"][0]["input_schema"] == schema


async def test_generate_on_a_v1beta_upstream(client: ollama.AsyncClient, simulator: Any) -> None:
    marker = uuid.uuid4().hex
    await client.generate(model="sim-gemini", prompt=marker, system="Be brief.", options={"num_predict": 9})
    body = await received(simulator, marker)
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert body["contents"] == [{"role": "user", "parts": [{"text": marker}]}]
    assert body["generationConfig"]["maxOutputTokens"] == 9
