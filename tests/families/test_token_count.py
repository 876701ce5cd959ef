"""Token counting (issue 37, point 3): ``/v1/messages/count_tokens`` and v1beta ``:countTokens``
forward to an upstream of the client's format when the model has one that answers, whose exact
figure is the answer, and fall back to the offline estimate otherwise; ``X-Gateway-Token-Count``
says which, and nothing is charged either way. Official SDKs as clients, the simulator as upstream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import pytest
import pytest_asyncio
from google import genai
from google.genai import types

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]

HEADER = "x-gateway-token-count"
MESSAGES = [{"role": "user", "content": "How many tokens is this sentence, exactly?"}]
SYSTEM = "Be brief."


@pytest_asyncio.fixture
async def env(gateway_server: Any, make_config: Any, simulator: Any) -> AsyncIterator[Any]:
    price = {"input_per_mtok": 1, "output_per_mtok": 2}
    config = make_config(
        extra_models=[{"id": m, "price": price} for m in ("claude-down", "gem-down", "claude-alias")],
        extra_upstreams=[
            # Every call to these fails (the simulator's fail503 option): no count from them.
            {"name": "sim-anthropic-down", "protocol": "messages", "base_url": simulator.base_url,
             "api_key": "sk-sim-fail503", "models": {"claude-down": "sim-claude"}},
            {"name": "sim-google-down", "protocol": "v1beta", "base_url": simulator.base_url,
             "api_key": "sk-sim-fail503", "models": {"gem-down": "sim-gemini"}},
            {"name": "sim-anthropic-alias", "protocol": "messages", "base_url": simulator.base_url,
             "api_key": "sk-sim", "models": {"claude-alias": "sim-claude"}},
        ],
    )
    handle = await gateway_server(config)
    handle.user = await handle.create_user("counter", quota_usd=5)
    handle.key_record = await handle.create_key(handle.user["id"], name="count")
    handle.sim = simulator.base_url
    yield handle


async def simulator_count(handle: Any, path: str, body: dict[str, Any], headers: dict[str, str]) -> int:
    async with handle.http.post(handle.sim + path, json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        data = await resp.json()
    return int(data.get("input_tokens", data.get("totalTokens", -1)))


@pytest.mark.parametrize("model", ["sim-claude", "claude-alias"])
async def test_messages_count_from_the_upstream(env: Any, model: str) -> None:
    sdk = anthropic.AsyncAnthropic(base_url=env.base_url, api_key=env.key, max_retries=0)
    raw = await sdk.messages.with_raw_response.count_tokens(model=model, system=SYSTEM, messages=MESSAGES)
    exact = await simulator_count(env, "/v1/messages/count_tokens",
                                  {"model": "sim-claude", "system": SYSTEM, "messages": MESSAGES},
                                  {"x-api-key": "sk-sim", "anthropic-version": "2023-06-01"})
    assert raw.headers[HEADER] == "upstream"
    assert (await raw.parse()).input_tokens == exact
    await sdk.close()


@pytest.mark.parametrize("model", ["sim-gemini", "claude-down"])
async def test_messages_count_estimated_without_such_upstream(env: Any, model: str) -> None:
    """A model served by another format, or whose upstream fails: the offline estimate."""
    sdk = anthropic.AsyncAnthropic(base_url=env.base_url, api_key=env.key, max_retries=0)
    raw = await sdk.messages.with_raw_response.count_tokens(model=model, system=SYSTEM, messages=MESSAGES)
    assert raw.headers[HEADER] == "estimate"
    assert (await raw.parse()).input_tokens > 0
    await sdk.close()


@pytest.mark.parametrize(("model", "source"), [("sim-gemini", "upstream"), ("sim-claude", "estimate"),
                                               ("gem-down", "estimate")])
async def test_v1beta_count(env: Any, model: str, source: str) -> None:
    client = genai.Client(api_key=env.key,
                          http_options=types.HttpOptions(base_url=env.base_url, api_version="v1beta"))
    counted = await client.aio.models.count_tokens(model=model, contents="How many tokens is this?")
    assert counted.total_tokens and counted.total_tokens > 0
    body = {"contents": [{"role": "user", "parts": [{"text": "How many tokens is this?"}]}]}
    reply = await env.request("POST", f"/v1beta/models/{model}:countTokens", json=body,
                              headers={"x-goog-api-key": env.key})
    assert reply.status == 200 and reply.headers[HEADER] == source
    assert reply.json()["totalTokens"] == counted.total_tokens
    if source == "upstream":
        exact = await simulator_count(env, "/v1beta/models/sim-gemini:countTokens", body,
                                      {"x-goog-api-key": "sk-sim"})
        assert counted.total_tokens == exact
    await client.aio.aclose()


async def test_counting_is_free(env: Any) -> None:
    before = (await env.request("GET", "/v1/dashboard/billing/subscription", key=env.key)).json()
    sdk = anthropic.AsyncAnthropic(base_url=env.base_url, api_key=env.key, max_retries=0)
    for model in ("sim-claude", "sim-gemini"):
        await sdk.messages.count_tokens(model=model, messages=MESSAGES)
    after = (await env.request("GET", "/v1/dashboard/billing/subscription", key=env.key)).json()
    assert after == before
    await sdk.close()
