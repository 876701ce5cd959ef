"""The response cache across two replicas on one PostgreSQL database: entries in Redis (shared by
both, bounded there too) or, without Redis, in the database's table. A miss on one replica is a hit
on the other, in either family form; another user never finds it; 50 hits at once over both
replicas under a key ceiling are served exactly as far as the ceiling goes, and the books balance.

Each test gets a PostgreSQL database of its own and a Redis key prefix of its own (db 14). With
``CI=true`` an unreachable server is a failure; otherwise the test is skipped."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import openai
import pytest
import pytest_asyncio

from gateway.accounts.metering.audit import run_audit
from gateway.storage.testing import fresh_database, postgres_required

from .conftest import (
    IN_NANO,
    OUT_NANO,
    cache,
    cache_config,
    kept,
    new_key,
    nonce,
    openai_client,
    upstream_calls,
)

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

pytestmark = pytest.mark.postgres

REDIS_URL = "redis://127.0.0.1:6379/14"


@pytest_asyncio.fixture
async def pg_dsn() -> AsyncIterator[str]:
    async for dsn in fresh_database("gw_cache"):
        yield dsn


@pytest_asyncio.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix of the test's own in a reachable Redis, its keys deleted afterwards."""
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        await client.aclose()
        if postgres_required():
            pytest.fail(f"CI=true but Redis is unreachable: {exc}")
        pytest.skip(f"Redis is not reachable: {exc}")
    prefix = f"test-cache:{secrets.token_hex(6)}:"
    try:
        yield prefix
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def _redis_count(prefix: str) -> tuple[int, int]:
    """(entries in the order set, entry keys) under ``prefix``."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)
    try:
        order = await client.zcard(f"{prefix}order")
        entries = [key async for key in client.scan_iter(match=f"{prefix}e:*")]
        return int(order), len(entries)
    finally:
        await client.aclose()


async def _ask(client: openai.AsyncOpenAI, prompt: str, stream: bool = False) -> tuple[str, str]:
    ask = [{"role": "user", "content": prompt}]
    raw = await client.chat.completions.with_raw_response.create(model="c-chat", messages=ask, stream=stream)
    if stream:
        chunks = [chunk async for chunk in raw.parse()]
        return raw.headers["x-gateway-cache"], "".join(
            c.choices[0].delta.content or "" for c in chunks if c.choices
        )
    return raw.headers["x-gateway-cache"], raw.parse().choices[0].message.content or ""


async def _two(gateway_server: StartGateway, config: Any) -> tuple[GatewayHandle, GatewayHandle]:
    return await gateway_server(config), await gateway_server(config)


@pytest.mark.parametrize("backend", ["redis", "postgres-table"])
async def test_a_miss_on_one_replica_is_a_hit_on_the_other(
    pg_dsn: str,
    redis_prefix: str,
    gateway_server: StartGateway,
    make_config: MakeConfig,
    simulator: Any,
    backend: str,
) -> None:
    shared: dict[str, Any] = {"redis": REDIS_URL} if backend == "redis" else {}
    config = cache_config(
        make_config, simulator.base_url, {"database": pg_dsn, **shared}, redis_prefix=redis_prefix
    )
    a, b = await _two(gateway_server, config)
    _, key = await new_key(a)
    _, other_key = await new_key(b)
    prompt = nonce()
    header, text = await _ask(openai_client(a, key), prompt, stream=True)
    assert header == "miss" and text
    await kept(a)
    assert await _ask(openai_client(b, key), prompt) == ("hit", text)
    assert await _ask(openai_client(b, key), prompt, stream=True) == ("hit", text)
    assert (await _ask(openai_client(b, other_key), prompt))[0] == "miss"  # another user
    assert await upstream_calls(simulator.base_url, prompt) == 2
    if backend == "redis":
        await kept(b)
        assert await _redis_count(redis_prefix) == (2, 2)


async def test_redis_entries_stay_within_the_bound(
    pg_dsn: str, redis_prefix: str, gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    config = cache_config(
        make_config,
        simulator.base_url,
        {"database": pg_dsn, "redis": REDIS_URL},
        redis_prefix=redis_prefix,
        max_entries=3,
    )
    a, b = await _two(gateway_server, config)
    _, key = await new_key(a)
    prompts = [nonce() for _ in range(6)]
    for i, prompt in enumerate(prompts):
        replica = a if i % 2 else b
        await _ask(openai_client(replica, key), prompt)
        await kept(replica)
        assert await _redis_count(redis_prefix) == (min(i + 1, 3), min(i + 1, 3))
    assert cache(a).evicted + cache(b).evicted == 3
    assert (await _ask(openai_client(a, key), prompts[-1]))[0] == "hit"
    assert (await _ask(openai_client(b, key), prompts[0]))[0] == "miss"


async def test_fifty_hits_over_two_replicas_keep_the_books(
    pg_dsn: str, redis_prefix: str, gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    top = {"database": pg_dsn, "redis": REDIS_URL, "metering": {"heartbeat_s": 0.5, "stale_after_s": 2.0}}
    config = cache_config(
        make_config, simulator.base_url, top, redis_prefix=redis_prefix, hit_price_ratio=0.5
    )
    a, b = await _two(gateway_server, config)
    user, key = await new_key(a)
    prompt = nonce()
    await _ask(openai_client(a, key), prompt)
    await kept(a)
    await a.gateway.meter.flush()
    storage = a.gateway.storage
    miss = (await storage.log_page(user["id"], 1, 10)).items[0]
    hit_cost = (miss.prompt_tokens * IN_NANO + miss.completion_tokens * OUT_NANO) // 2
    capped = await b.create_key(user["id"], name="capped", quota_usd=(20 * hit_cost + hit_cost // 2) / 1e9)
    clients = [openai_client(a, capped["key"]), openai_client(b, capped["key"])]

    async def one(i: int) -> str:
        try:
            return (await _ask(clients[i % 2], prompt, stream=i % 4 < 2))[0]
        except openai.PermissionDeniedError as exc:
            assert exc.code == "insufficient_quota"
            return "refused"

    async with asyncio.timeout(60):
        answers = await asyncio.gather(*(one(i) for i in range(50)))
        await a.gateway.meter.flush()
        await b.gateway.meter.flush()
    assert answers.count("hit") == 20 and answers.count("refused") == 30
    logs = (await storage.log_page(user["id"], 1, 200)).items
    hits = [row for row in logs if row.outcome == "cache_hit"]
    assert len(hits) == 20 and {row.charge_nano for row in hits} == {hit_cost}
    stored = await storage.get_key(capped["id"])
    assert stored is not None and stored.spent_nano == 20 * hit_cost
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []
    assert await upstream_calls(simulator.base_url, prompt) == 1
