"""The Ollama family's errors, in Ollama's own envelope ``{"error": "<message>"}`` (with the
gateway's ``code`` beside it): bad bodies are 400s naming the field that never reach an upstream,
credentials are 401s, unknown models 404s, upstream failures are relayed or 502, and a stream that
breaks ends with an in-band error line the official client raises."""

from __future__ import annotations

import uuid
from typing import Any

import aiohttp
import ollama
import pytest

from tests.plugins.ollama_support import OLLAMA_MODELS, OllamaGateway, ollama_upstream


async def _sim_log(ollama_gw: OllamaGateway) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(ollama_gw.sim.base_url + "/_sim/requests") as resp:
        entries: list[dict[str, Any]] = await resp.json()
    return entries


def _envelope(reply: Any, status: int, code: str) -> str:
    assert reply.status == status, reply.text
    assert reply.headers["X-Service-Request-Id"].startswith("req_")
    body = reply.json()
    assert set(body) <= {"error", "code", "param"} and isinstance(body["error"], str) and body["error"]
    assert body["code"] == code
    return str(body["error"])


BAD_BODIES = [
    ("/api/chat", {"model": "sim-llama", "messages": "hello"}, "messages"),
    ("/api/chat", {"messages": [{"role": "user", "content": "hi"}]}, "model"),
    ("/api/chat", {"model": "sim-llama", "messages": [{"role": "robot", "content": "hi"}]},
     "messages[0].role"),
    ("/api/chat", {"model": "sim-llama", "messages": [{"role": "user", "content": "hi"}],
                   "options": {"temperature": "hot"}}, "options.temperature"),
    ("/api/chat", {"model": "sim-llama", "messages": [{"role": "user", "content": "hi"}],
                   "think": "extreme"}, "think"),
    ("/api/chat", {"model": "sim-llama", "messages": [{"role": "user", "content": "hi"},
                                                      {"role": "tool", "content": "42", "tool_name": "f"}]},
     "messages[1]"),
    ("/api/chat", {"model": "sim-llama", "messages": [{"role": "user", "content": "hi", "images": ["%%%"]}]},
     "messages[0].images[0]"),
    ("/api/generate", {"model": "sim-llama"}, "prompt"),
    ("/api/generate", {"model": "sim-llama", "prompt": "hi", "stream": "yes"}, "stream"),
    ("/api/embed", {"model": "sim-llama-embed", "input": []}, "input"),
    ("/api/embed", {"model": "sim-llama-embed", "input": [1, 2]}, "input[0]"),
    ("/api/embeddings", {"model": "sim-llama-embed"}, "prompt"),
]


async def test_bad_bodies_are_400s_naming_the_field(ollama_gw: OllamaGateway) -> None:
    before = len(await _sim_log(ollama_gw))
    for path, body, field in BAD_BODIES:  # one gateway for every case (starts are the cost)
        reply = await ollama_gw.gw.request("POST", path, json=body, key=ollama_gw.key)
        message = _envelope(reply, 400, "invalid_request")
        assert f"`{field}`" in message and reply.json().get("param") == field, (path, body, message)
    # sim-llama is on an Ollama upstream: the same-format fast path would forward the bytes
    assert len(await _sim_log(ollama_gw)) == before


async def test_not_json_and_empty_body(ollama_gw: OllamaGateway) -> None:
    reply = await ollama_gw.gw.request("POST", "/api/chat", data=b"{not json", key=ollama_gw.key)
    assert "not valid JSON" in _envelope(reply, 400, "invalid_request")
    reply = await ollama_gw.gw.request("POST", "/api/chat", data=b"", key=ollama_gw.key)
    _envelope(reply, 400, "invalid_request")


async def test_official_client_sees_400(ollama_gw: OllamaGateway) -> None:
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": f"Bearer {ollama_gw.key}"})
    try:
        with pytest.raises(ollama.ResponseError) as caught:
            await sdk.chat(model="sim-chat", messages=[{"role": "user", "content": "hi"}],
                           options={"num_predict": "many"})
    finally:
        await sdk.close()
    assert caught.value.status_code == 400 and "options.num_predict" in caught.value.error


async def test_credentials(ollama_gw: OllamaGateway) -> None:
    chat = {"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    missing = await ollama_gw.gw.request("POST", "/api/chat", json=chat)
    assert "Authorization" in _envelope(missing, 401, "invalid_api_key")
    wrong = await ollama_gw.gw.request("POST", "/api/chat", json=chat, key="sk-" + "0" * 48)
    _envelope(wrong, 401, "invalid_api_key")
    tags = await ollama_gw.gw.request("GET", "/api/tags", key="sk-nope")
    _envelope(tags, 401, "invalid_api_key")
    sdk = ollama.AsyncClient(host=ollama_gw.base_url, headers={"Authorization": "Bearer sk-not-a-key"})
    try:
        with pytest.raises(ollama.ResponseError) as caught:
            stream = await sdk.chat(model="sim-chat", stream=True,
                                    messages=[{"role": "user", "content": "hi"}])
            async for _ in stream:  # a stream's request is sent on first iteration
                pass
    finally:
        await sdk.close()
    assert caught.value.status_code == 401


async def test_unknown_model_and_wrong_method(ollama_gw: OllamaGateway) -> None:
    body = {"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}
    reply = await ollama_gw.gw.request("POST", "/api/chat", key=ollama_gw.key, json=body)
    assert "no-such-model" in _envelope(reply, 404, "model_not_found")
    wrong = await ollama_gw.gw.request("GET", "/api/chat", key=ollama_gw.key)
    assert wrong.status == 405 and isinstance(wrong.json()["error"], str)


@pytest.fixture
async def faulty_gw(gateway_server: Any, make_config: Any, ollama_sim: Any) -> OllamaGateway:
    """Ollama upstreams that fail: ``sim-llama`` answers 400, ``sim-llama-alias`` 503, and
    ``sim-llama-embed`` (Ollama) and ``sim-cut-chat`` (chat) break their streams after 3 chunks
    (simulator fault options on the upstream key)."""
    url = ollama_sim.base_url
    upstreams = [
        {**ollama_upstream(url, "sk-sim-fail400"), "name": "bad", "models": ["sim-llama"]},
        {**ollama_upstream(url, "sk-sim-fail503"), "name": "down", "models": ["sim-llama-alias"]},
        {**ollama_upstream(url, "sk-sim-cut3"), "name": "cut", "models": ["sim-llama-embed"]},
        {"name": "cut-chat", "protocol": "chat", "base_url": ollama_sim.base_url, "api_key": "sk-sim-cut3",
         "models": ["sim-cut-chat"]},
    ]
    models = [*OLLAMA_MODELS, {"id": "sim-cut-chat", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}]
    handle = await gateway_server(make_config(extra_models=models, extra_upstreams=upstreams),
                                  load_entrypoints=True)
    handle.user = await handle.create_user("faulty", quota_usd=10)
    handle.key_record = await handle.create_key(handle.user["id"])
    return OllamaGateway(handle, ollama_sim)


async def test_upstream_4xx_relayed_and_5xx_is_502(faulty_gw: OllamaGateway) -> None:
    for client_path, model in (("/api/chat", "sim-llama"), ("/v1/chat/completions", "sim-llama")):
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": False}
        reply = await faulty_gw.gw.request("POST", client_path, json=body, key=faulty_gw.key)
        assert reply.status == 400, reply.text
        assert "simulated failure" in reply.text  # the Ollama upstream's own message, relayed
    body = {"model": "sim-llama-alias", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    reply = await faulty_gw.gw.request("POST", "/api/chat", json=body, key=faulty_gw.key)
    _envelope(reply, 502, "upstream_error")


@pytest.mark.parametrize("model", ["sim-llama-embed", "sim-cut-chat"])
async def test_broken_stream_ends_with_an_error_line(faulty_gw: OllamaGateway, model: str) -> None:
    """Both upstreams cut their stream after 3 chunks: the Ollama one on the fast path (bytes
    relayed), the chat one translated (the plugin's stream encoder writes the error line)."""
    sdk = ollama.AsyncClient(host=faulty_gw.base_url, headers={"Authorization": f"Bearer {faulty_gw.key}"})
    seen: list[str] = []
    try:
        with pytest.raises(ollama.ResponseError) as caught:
            async for chunk in await sdk.chat(model=model, stream=True,
                                              messages=[{"role": "user", "content": "sim:tokens=8 x"}]):
                seen.append(chunk.message.content or "")
    finally:
        await sdk.close()
    assert 1 <= len([s for s in seen if s]) <= 3 and "ended before it was complete" in caught.value.error


async def test_unique_marker_never_reaches_upstream_on_quota_refusal(ollama_gw: OllamaGateway) -> None:
    gw = ollama_gw.gw
    broke = await gw.create_key(gw.user["id"], name="broke", quota_usd=0)
    marker = uuid.uuid4().hex
    reply = await gw.request("POST", "/api/chat", key=broke["key"], json={
        "model": "sim-llama", "messages": [{"role": "user", "content": marker}]})
    _envelope(reply, 403, "insufficient_quota")
    assert not [e for e in await _sim_log(ollama_gw) if marker in str(e["body_json_or_null"])]
