"""Server-level behaviour: request log, auth, fault options, latency settings, CLI entry point."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import pytest

from gateway_simulator import SimulatorSettings, start_simulator

pytestmark = pytest.mark.asyncio(loop_scope="session")

OAI = {"Authorization": "Bearer sk-sim"}
ANT = {"x-api-key": "sk-sim", "anthropic-version": "2023-06-01"}
CHAT = {"model": "gpt-sim", "messages": [{"role": "user", "content": "hello sim:tokens=8"}]}


def _chat(**extra: object) -> dict[str, object]:
    return {**CHAT, **extra}


async def test_healthz_and_request_log(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.get(f"{base_url}/healthz") as r:
        assert r.status == 200 and r.headers["x-simulator"] == "true"
    async with http.delete(f"{base_url}/_sim/requests") as r:
        assert r.status == 200
    headers = {**OAI, "X-Request-ID": "rid-123"}
    async with http.post(f"{base_url}/v1/chat/completions?trace=1", json=CHAT, headers=headers) as r:
        assert r.status == 200
    async with http.post(f"{base_url}/v1/chat/completions", data=b"not json", headers=OAI) as r:
        assert r.status == 400 and (await r.json())["error"]["type"] == "invalid_request_error"
    async with http.get(f"{base_url}/_sim/requests") as r:
        log = await r.json()
    assert [e["path"] for e in log] == ["/v1/chat/completions", "/v1/chat/completions"]
    first = log[0]
    assert first["method"] == "POST" and first["query"] == {"trace": "1"}
    assert (
        first["headers"]["x-request-id"] == "rid-123" and first["headers"]["authorization"] == "Bearer sk-sim"
    )
    assert first["body_json_or_null"] == CHAT and log[1]["body_json_or_null"] is None
    async with http.delete(f"{base_url}/_sim/requests"), http.get(f"{base_url}/_sim/requests") as r:
        assert await r.json() == []


async def test_missing_key_is_401_everywhere(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.post(f"{base_url}/v1/chat/completions", json=CHAT) as r:
        assert r.status == 401
        assert (await r.json())["error"]["code"] == "invalid_api_key"
    async with http.post(f"{base_url}/v1/embeddings", json={"model": "x", "input": "y"}) as r:
        assert r.status == 401


async def test_fail_option_by_key_and_model(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.post(
        f"{base_url}/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer sk-sim-fail429"}
    ) as r:
        assert r.status == 429 and (await r.json())["error"]["message"] == "simulated failure"
    body = {"model": "claude-sim-fail503", "max_tokens": 5, "messages": CHAT["messages"]}
    async with http.post(f"{base_url}/v1/messages", json=body, headers=ANT) as r:
        assert r.status == 503 and (await r.json())["type"] == "error"
    # other models on the same upstream are unaffected
    async with http.post(f"{base_url}/v1/chat/completions", json=CHAT, headers=OAI) as r:
        assert r.status == 200


async def test_cut_streams_and_bodies(http: aiohttp.ClientSession, base_url: str) -> None:
    cut = {"Authorization": "Bearer sk-sim-cut3"}
    async with http.post(f"{base_url}/v1/chat/completions", json=_chat(stream=True), headers=cut) as r:
        assert r.status == 200
        got = b""
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in r.content.iter_any():
                got += chunk
    assert got.count(b"data: ") == 3 and b"[DONE]" not in got
    async with http.post(f"{base_url}/v1/chat/completions", json=_chat(), headers=cut) as r:
        with pytest.raises(aiohttp.ClientPayloadError):
            await r.read()
    body = {"model": "claude-sim-cut2", "max_tokens": 50, "stream": True, "messages": CHAT["messages"]}
    async with http.post(f"{base_url}/v1/messages", json=body, headers=ANT) as r:
        got = b""
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in r.content.iter_any():
                got += chunk
    assert got.count(b"event: content_block_delta") == 2 and b"message_stop" not in got
    gem = {"contents": [{"parts": [{"text": "hi sim:tokens=9"}]}]}
    url = f"{base_url}/v1beta/models/gemini-sim-cut1:streamGenerateContent?alt=sse&key=k"
    async with http.post(url, json=gem) as r:
        got = b""
        with pytest.raises(aiohttp.ClientPayloadError):
            async for chunk in r.content.iter_any():
                got += chunk
    assert got.count(b"data: ") == 1


async def test_cut_with_sdk_raises(base_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-sim-cut2", max_retries=0)
    seen = 0
    with pytest.raises(Exception):  # noqa: B017 - the transport error type is the SDK's business
        async for _ in await client.chat.completions.create(
            model="gpt-sim", messages=CHAT["messages"], stream=True
        ):
            seen += 1
    await client.close()
    assert seen == 2


async def test_nousage(http: aiohttp.ClientSession, base_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-sim-nousage", max_retries=0)
    r = await client.chat.completions.create(model="gpt-sim", messages=CHAT["messages"])
    assert r.usage is None and r.choices[0].message.content
    stream = await client.chat.completions.create(
        model="gpt-sim", messages=CHAT["messages"], stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    assert all(c.usage is None for c in chunks) and all(c.choices for c in chunks)
    await client.close()
    body = {"model": "claude-sim", "max_tokens": 50, "stream": True, "messages": CHAT["messages"]}
    async with http.post(
        f"{base_url}/v1/messages", json=body, headers={**ANT, "x-api-key": "k-nousage"}
    ) as resp:
        text = await resp.text()
    assert '"usage"' not in text and "message_stop" in text
    gem = {"contents": [{"parts": [{"text": "hi"}]}]}
    url = f"{base_url}/v1beta/models/gemini-sim-nousage:generateContent?key=k"
    async with http.post(url, json=gem) as resp:
        assert "usageMetadata" not in await resp.json()


async def test_hang_is_cancellable(http: aiohttp.ClientSession, base_url: str) -> None:
    timeout = aiohttp.ClientTimeout(total=0.3)
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        async with http.post(
            f"{base_url}/v1/chat/completions",
            json=CHAT,
            headers={"Authorization": "Bearer sk-hang"},
            timeout=timeout,
        ) as r:
            await r.read()
    assert time.monotonic() - started < 2
    async with http.get(f"{base_url}/healthz") as r:
        assert r.status == 200


async def test_latency_settings_and_key_overrides(http: aiohttp.ClientSession) -> None:
    runner = await start_simulator(
        port=0, settings=SimulatorSettings(ttft_ms=150, token_ms=20, default_tokens=6)
    )
    try:
        url = f"http://127.0.0.1:{runner.sim_port}/v1/chat/completions"
        plain = {"model": "gpt-sim", "stream": True, "messages": [{"role": "user", "content": "timing"}]}
        started = time.monotonic()
        arrivals: list[float] = []
        async with http.post(url, json=plain, headers=OAI) as r:
            async for line in r.content:
                if line.startswith(b"data: {"):
                    arrivals.append(time.monotonic() - started)
        assert len(arrivals) == 6  # default_tokens
        assert 0.14 <= arrivals[0] < 0.6
        assert arrivals[-1] - arrivals[0] >= 5 * 0.02 * 0.9
        started = time.monotonic()
        async with http.post(url, json=plain, headers={"Authorization": "Bearer sk-ttft0-tok0"}) as r:
            await r.read()
        assert time.monotonic() - started < 0.12
    finally:
        await runner.cleanup()


async def test_shared_model_paths_reach_the_right_side(http: aiohttp.ClientSession, base_url: str) -> None:
    """``GET /v1/models[/{id}]`` is served by three sides, told apart by credential and path."""
    async with http.get(f"{base_url}/v1/models/gpt-sim", headers=OAI) as r:
        assert await r.json() == {"id": "gpt-sim", "object": "model", "created": 1_700_000_000,
                                  "owned_by": "simulator"}
        assert r.headers["x-request-id"].startswith("req_sim_")
    async with http.get(f"{base_url}/v1/models/claude-sim", headers=ANT) as r:
        assert (await r.json())["type"] == "model" and r.headers["request-id"] == r.headers["x-request-id"]
    async with http.get(f"{base_url}/v1/models/gemini-sim", headers={"x-goog-api-key": "k"}) as r:
        assert (await r.json())["name"] == "models/gemini-sim" and "x-request-id" not in r.headers
    async with http.get(f"{base_url}/v1/models/gemini-sim:generateContent", headers=OAI) as r:
        assert r.status == 404 and (await r.json())["error"]["status"] == "NOT_FOUND"
    async with http.get(f"{base_url}/v1/models", headers=ANT) as r:
        assert (await r.json())["first_id"] == "claude-sim"
    async with http.get(f"{base_url}/v1/models", headers=OAI) as r:
        assert (await r.json())["object"] == "list"
    async with http.get(f"{base_url}/v1/models") as r:
        assert r.status == 401 and (await r.json())["error"]["code"] == "invalid_api_key"
