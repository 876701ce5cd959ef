"""Metering and quota for the plugin's family and protocol exactly as for any built-in one: each
call leaves one request-log row (family ``ollama``, the route, the upstream's counts) and is
charged what the upstream reported, down to the nano-USD; a key without quota is refused before any
upstream is asked. Prices: sim-chat and sim-llama 0.5 / 1.5 USD per million tokens in / out
(500 / 1,500 nano-USD per token), sim-embed 0.02 (20 nano-USD per input token)."""

from __future__ import annotations

import asyncio
from typing import Any

import ollama
import openai
import pytest

from gateway.accounts.records import RequestLog
from gateway.runtime.context import Gateway
from tests.plugins.ollama_support import OLLAMA_MODELS, OllamaGateway, ollama_upstream


async def _wait_logs(gateway: Gateway, user_id: int, count: int) -> list[RequestLog]:
    """The user's request-log rows once ``count`` are there: a stream's row is written as its relay
    ends, which is just after the client has read the last byte."""
    rows: list[RequestLog] = []
    for _ in range(250):
        await gateway.meter.flush()
        rows = list((await gateway.storage.log_page(user_id, 1, 100)).items)
        if len(rows) >= count:
            break
        await asyncio.sleep(0.02)
    return rows


async def _logs(ollama_gw: OllamaGateway, count: int = 1) -> list[RequestLog]:
    return await _wait_logs(ollama_gw.gw.gateway, ollama_gw.gw.user["id"], count)


async def _balance(ollama_gw: OllamaGateway) -> int:
    gateway = ollama_gw.gw.gateway
    await gateway.meter.flush()
    user = await gateway.storage.get_user(ollama_gw.gw.user["id"])
    assert user is not None
    return user.balance_nano


def _client(ollama_gw: OllamaGateway, key: str | None = None) -> ollama.AsyncClient:
    return ollama.AsyncClient(host=ollama_gw.base_url,
                              headers={"Authorization": f"Bearer {key or ollama_gw.key}"})


@pytest.mark.parametrize(("model", "stream"), [("sim-chat", False), ("sim-chat", True),
                                               ("sim-llama", False), ("sim-llama", True)])
async def test_chat_is_charged_what_the_upstream_reported(ollama_gw: OllamaGateway, model: str,
                                                          stream: bool) -> None:
    before = await _balance(ollama_gw)
    sdk = _client(ollama_gw)
    try:
        messages = [{"role": "user", "content": "sim:tokens=9 a"}]
        if stream:
            chunks = [c async for c in await sdk.chat(model=model, stream=True, messages=messages)]
            final = chunks[-1]
        else:
            final = await sdk.chat(model=model, messages=messages)
    finally:
        await sdk.close()
    prompt, output = final.prompt_eval_count, final.eval_count
    assert prompt and output == 9
    (row,) = await _logs(ollama_gw)
    assert (row.family, row.route, row.model, row.is_stream) == ("ollama", "/api/chat", model, stream)
    assert row.outcome == "success" and not row.usage_estimated
    assert (row.prompt_tokens, row.completion_tokens) == (prompt, output)
    assert row.upstream == ("sim-openai" if model == "sim-chat" else "sim-ollama")
    assert row.charge_nano == prompt * 500 + output * 1_500
    assert await _balance(ollama_gw) == before - row.charge_nano


async def test_embeddings_and_generate_are_metered(ollama_gw: OllamaGateway) -> None:
    sdk = _client(ollama_gw)
    try:
        embedded = await sdk.embed(model="sim-embed", input=["alpha beta", "gamma"])
        generated = await sdk.generate(model="sim-llama", prompt="sim:tokens=4 go")
    finally:
        await sdk.close()
    rows = {row.route: row for row in await _logs(ollama_gw, 2)}
    embed = rows["/api/embed"]
    tokens = embedded.prompt_eval_count  # as the chat upstream reported it
    assert tokens and embed.family == "ollama" and not embed.usage_estimated
    assert (embed.prompt_tokens, embed.completion_tokens) == (tokens, 0)
    assert embed.charge_nano == tokens * 20
    gen = rows["/api/generate"]
    assert gen.completion_tokens == generated.eval_count == 4
    assert gen.charge_nano == (generated.prompt_eval_count or 0) * 500 + 4 * 1_500


async def test_other_families_on_an_ollama_upstream_are_metered(ollama_gw: OllamaGateway) -> None:
    oai = openai.AsyncOpenAI(base_url=ollama_gw.base_url + "/v1", api_key=ollama_gw.key, max_retries=0)
    try:
        completion = await oai.chat.completions.create(
            model="sim-llama", messages=[{"role": "user", "content": "sim:tokens=5 go"}])
    finally:
        await oai.close()
    assert completion.usage is not None
    (row,) = await _logs(ollama_gw)
    assert (row.family, row.upstream) == ("chat", "sim-ollama")
    assert (row.prompt_tokens, row.completion_tokens) == (completion.usage.prompt_tokens, 5)
    assert row.charge_nano == completion.usage.prompt_tokens * 500 + 5 * 1_500


@pytest.mark.parametrize("model", ["sim-chat", "sim-llama"])
async def test_insufficient_quota_is_refused(ollama_gw: OllamaGateway, model: str) -> None:
    gw: Any = ollama_gw.gw
    # 0.00001 USD = 10,000 nano-USD: less than the worst case of a call (its output ceiling alone
    # is 4,096 tokens x 1,500 nano-USD), so the reservation fails before any upstream is asked.
    poor = await gw.create_key(gw.user["id"], name="poor", quota_usd=0.00001)
    before = await _balance(ollama_gw)
    sdk = _client(ollama_gw, poor["key"])
    try:
        with pytest.raises(ollama.ResponseError) as caught:
            await sdk.chat(model=model, messages=[{"role": "user", "content": "hello"}])
    finally:
        await sdk.close()
    assert caught.value.status_code == 403 and "quota" in caught.value.error.lower()
    (row,) = await _logs(ollama_gw)
    assert row.status == 403 and row.error_code == "insufficient_quota" and row.charge_nano == 0
    assert row.attempts == 0 and row.upstream is None
    assert await _balance(ollama_gw) == before


@pytest.mark.parametrize("stream", [False, True])
async def test_no_usage_from_the_upstream_is_estimated_and_flagged(gateway_server: Any, make_config: Any,
                                                                   ollama_sim: Any, stream: bool) -> None:
    """An Ollama upstream that reports no counts (``nousage``): the call is still charged, from the
    gateway's offline estimate, and the log says so."""
    upstream = ollama_upstream(ollama_sim.base_url, api_key="sk-sim-nousage")
    handle = await gateway_server(make_config(extra_models=OLLAMA_MODELS, extra_upstreams=[upstream]),
                                  load_entrypoints=True)
    user = await handle.create_user("nousage")
    key = (await handle.create_key(user["id"]))["key"]
    reply = await handle.request("POST", "/api/chat", key=key, json={
        "model": "sim-llama", "stream": stream, "messages": [{"role": "user", "content": "sim:tokens=6 go"}]})
    assert reply.status == 200, reply.text
    (row,) = await _wait_logs(handle.gateway, user["id"], 1)
    assert row.outcome == "usage_estimated" and row.usage_estimated
    assert row.prompt_tokens > 0 and row.completion_tokens >= 6 and row.charge_nano > 0
