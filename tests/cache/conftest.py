"""Fixtures of the response-cache tests (issue 36 point 4): a gateway with the cache on, over the
session simulator, and the helpers that read its books back.

Every test asks with a prompt of its own (``nonce``), so that the simulator's request log
(``GET /_sim/requests``) tells how many of its calls reached an upstream.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import anthropic
import openai
import pytest_asyncio
from google import genai
from google.genai import types

from plugins.cache import ResponseCache, cache_of

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

PRICE = {"input_per_mtok": 1, "output_per_mtok": 2}  # 1,000 / 2,000 nano-USD per token
IN_NANO, OUT_NANO = 1_000, 2_000


def cache_models() -> list[dict[str, Any]]:
    """A model per protocol at ``PRICE``, one whose streams the upstream cuts, one whose upstream
    always fails, and one that falls back to ``c-chat``."""
    return [
        {"id": "c-chat", "price": PRICE},
        {"id": "c-messages", "price": PRICE},
        {"id": "c-v1beta", "price": PRICE},
        {"id": "c-cut", "price": PRICE},
        {"id": "c-down", "price": PRICE},
        # Every upstream of c-primary fails: c-chat, its fallback, serves it at c-chat's prices.
        {"id": "c-primary", "price": {"input_per_mtok": 5, "output_per_mtok": 10}, "fallbacks": ["c-chat"]},
    ]


def cache_upstreams(base_url: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "cache-chat",
            "protocol": "chat",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": {"c-chat": "sim-chat", "c-cut": "sim-cut3"},
        },
        {
            "name": "cache-messages",
            "protocol": "messages",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": {"c-messages": "sim-claude"},
        },
        {
            "name": "cache-v1beta",
            "protocol": "v1beta",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": {"c-v1beta": "sim-gemini"},
        },
        {
            "name": "cache-down",
            "protocol": "chat",
            "base_url": base_url,
            "api_key": "sk-sim-fail503",
            "models": {"c-down": "sim-chat", "c-primary": "sim-chat"},
        },
    ]


def cache_config(
    make_config: MakeConfig, base_url: str, top: dict[str, Any] | None = None, **cache: Any
) -> Any:
    """The test config with the cache on (``cache``: its settings over these; ``top``: other
    top-level keys)."""
    settings = {"enabled": True, "ttl_s": 60, "hit_price_ratio": 0.0, **cache}
    return make_config(
        extra_models=cache_models(),
        extra_upstreams=cache_upstreams(base_url),
        routing={"max_attempts": 1, "cooldown_s": 0.001},
        cache=settings,
        **(top or {}),
    )


@pytest_asyncio.fixture
async def cache_gw(gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> GatewayHandle:
    """The cache on for every key, hits free."""
    return await gateway_server(cache_config(make_config, simulator.base_url))


def nonce() -> str:
    return f"cache-test {secrets.token_hex(6)} sim:tokens=6"


async def upstream_calls(sim_base_url: str, marker: str) -> int:
    """How many requests holding ``marker`` reached the simulator."""
    async with aiohttp.ClientSession() as http, http.get(f"{sim_base_url}/_sim/requests") as resp:
        entries = await resp.json()
    return sum(marker in str(entry.get("body_json_or_null")) for entry in entries)


def cache(gw: GatewayHandle) -> ResponseCache:
    found = cache_of(gw.gateway)
    assert found is not None
    return found


async def kept(gw: GatewayHandle, timeout_s: float = 5.0) -> None:
    """The answers of the calls answered so far are kept: a stream's is handed to the cache just
    after its last byte was sent, so first every request in flight ends (the test makes none
    meanwhile), then the cache's writes are awaited."""
    deadline = time.monotonic() + timeout_s
    while gw.gateway.lifecycle.in_flight > 0:
        assert time.monotonic() < deadline, "a request of the gateway is still in flight"
        await asyncio.sleep(0.005)
    await cache(gw).drained()


async def new_key(gw: GatewayHandle, quota_usd: float = 100, **fields: Any) -> tuple[dict[str, Any], str]:
    user = await gw.create_user(quota_usd=quota_usd)
    key = await gw.create_key(user["id"], name="cache", **fields)
    return user, key["key"]


def openai_client(gw: GatewayHandle, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


def anthropic_client(gw: GatewayHandle, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=key, max_retries=0)


@asynccontextmanager
async def genai_client(gw: GatewayHandle, key: str) -> AsyncIterator[genai.Client]:
    client = genai.Client(
        api_key=key, http_options=types.HttpOptions(base_url=gw.base_url, api_version="v1beta")
    )
    try:
        yield client
    finally:
        await client.aio.aclose()


def query(gw: GatewayHandle, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows of the gateway's SQLite database, read on a connection of the test's own."""
    with sqlite3.connect(Path(gw.gateway.config.database.removeprefix("sqlite:///"))) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(sql, params)]


async def log_rows(
    gw: GatewayHandle, user_id: int, count: int, timeout_s: float = 5.0
) -> list[dict[str, Any]]:
    """The request-log rows of ``user_id``, once at least ``count`` are written."""
    deadline = time.monotonic() + timeout_s
    while True:
        await gw.gateway.meter.flush()
        rows = query(gw, "SELECT * FROM request_logs WHERE user_id = ? ORDER BY id", (user_id,))
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(0.02)


async def books_balance(gw: GatewayHandle) -> None:
    """No hold left open, and the audit of balances against the ledger is clean."""
    await gw.gateway.meter.flush(return_leases=True)
    assert await gw.gateway.storage.open_reservations() == []
    assert await gw.gateway.storage.audit() == []
