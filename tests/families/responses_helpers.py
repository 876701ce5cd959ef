"""Shared by the Responses tests: a gateway whose ``resp-native`` model is served by a chat upstream
with the ``responses`` feature, an openai SDK client for it, and the simulator's request log."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest_asyncio

from tests.conftest import GatewayHandle, MakeConfig, SimulatorHandle, StartGateway

MODELS = ["sim-chat", "sim-claude", "sim-gemini", "resp-native"]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def responses_config(make_config: MakeConfig, simulator: SimulatorHandle, **overrides: Any) -> Any:
    return make_config(
        extra_models=[
            {
                "id": "resp-native",
                "price": {"input_per_mtok": 1, "output_per_mtok": 2, "cache_read_per_mtok": 0.1},
            }
        ],
        extra_upstreams=[
            {
                "name": "sim-responses",
                "protocol": "chat",
                "base_url": simulator.base_url,
                "api_key": "sk-sim",
                "models": {"resp-native": "gpt-sim"},
                "features": ["responses"],
            }
        ],
        **overrides,
    )


async def sdk_client(handle: GatewayHandle) -> openai.AsyncOpenAI:
    handle.user = await handle.create_user("u" + secrets.token_hex(3), quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="test")
    return openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=handle.key, max_retries=0)


@pytest_asyncio.fixture
async def rgw(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle
) -> GatewayHandle:
    return await gateway_server(responses_config(make_config, simulator))


@pytest_asyncio.fixture
async def rclient(rgw: GatewayHandle) -> AsyncIterator[openai.AsyncOpenAI]:
    c = await sdk_client(rgw)
    yield c
    await c.close()


async def upstream_bodies(simulator: SimulatorHandle, marker: str) -> list[dict[str, Any]]:
    """Bodies of the requests the simulator received that mention ``marker``."""
    async with aiohttp.ClientSession() as http, http.get(simulator.base_url + "/_sim/requests") as resp:
        entries = await resp.json()
    return [e for e in entries if marker in str(e["body_json_or_null"])]
