"""Rate limits across three gateway replicas on one PostgreSQL database and one Redis.

1. A key with rpm 10 hit by 30 concurrent calls spread over the three: exactly 10 are served, the
   rest are 429 with Retry-After, refused before any hold (balance = charges of the 10).
2. A PATCH through one replica applies on the others at once (auth cache invalidation).
3. tpm: the tokens a call settles on one replica count on the others.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

pytestmark = pytest.mark.postgres

CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 5}


async def replicas(gateway_server: StartGateway, make_config: MakeConfig, dsn: str,
                   redis_url: str) -> list[GatewayHandle]:
    config = make_config(database=dsn, redis=redis_url)
    first = await gateway_server(config)  # migrates the database before the others open it
    return [first, *await asyncio.gather(gateway_server(config), gateway_server(config))]


async def chat(handle: GatewayHandle, key: str) -> int:
    return (await handle.request("POST", "/v1/chat/completions", json=CHAT, key=key)).status


async def test_rpm_holds_across_three_replicas(pg_dsn: str, redis_url: str, gateway_server: StartGateway,
                                               make_config: MakeConfig) -> None:
    nodes = await replicas(gateway_server, make_config, pg_dsn, redis_url)
    user = await nodes[0].create_user(quota_usd=10)
    key = await nodes[1].create_key(user["id"], rpm=10)
    replies = await asyncio.gather(*(nodes[i % 3].request("POST", "/v1/chat/completions", json=CHAT,
                                                          key=key["key"]) for i in range(30)))
    statuses = [r.status for r in replies]
    assert statuses.count(200) == 10, statuses
    assert statuses.count(429) == 20, statuses
    for reply in replies:
        if reply.status == 429:
            assert reply.json()["error"]["code"] == "rate_limit_exceeded"
            assert 1 <= int(reply.headers["retry-after"]) <= 60
    for node in nodes:
        await node.gateway.meter.flush()
    storage = nodes[0].gateway.storage
    page = await storage.log_page(user["id"], 1, 100)
    charged = sum(item.charge_nano for item in page.items)
    assert all(item.charge_nano == 0 and item.upstream is None for item in page.items if item.status == 429)
    stored = await storage.get_user(user["id"])
    assert stored is not None and charged > 0
    assert stored.balance_nano == 10 * 10**9 - charged  # nothing held or charged for a refusal


async def test_patch_applies_at_once_on_every_replica(pg_dsn: str, redis_url: str,
                                                      gateway_server: StartGateway,
                                                      make_config: MakeConfig) -> None:
    a, b, c = await replicas(gateway_server, make_config, pg_dsn, redis_url)
    user = await a.create_user(quota_usd=10)
    key = await a.create_key(user["id"], rpm=2)
    assert [await chat(b, key["key"]), await chat(c, key["key"])] == [200, 200]
    assert await chat(b, key["key"]) == 429
    assert await chat(c, key["key"]) == 429
    patched = await a.admin("PATCH", f"/admin/keys/{key['id']}", {"rpm": 4})
    assert patched.status == 200
    await asyncio.sleep(0.3)  # the invalidation message on Redis (the replicas test: < 0.3 s)
    assert [await chat(b, key["key"]), await chat(c, key["key"])] == [200, 200]
    assert await chat(a, key["key"]) == 429
    cleared = await c.admin("PATCH", f"/admin/keys/{key['id']}", {"rpm": None})
    assert cleared.status == 200
    await asyncio.sleep(0.3)
    assert [await chat(n, key["key"]) for n in (a, b)] == [200, 200]


async def test_tpm_tokens_count_on_every_replica(pg_dsn: str, redis_url: str, gateway_server: StartGateway,
                                                 make_config: MakeConfig) -> None:
    a, b, c = await replicas(gateway_server, make_config, pg_dsn, redis_url)
    user = await a.create_user(quota_usd=10)
    key = await a.create_key(user["id"], tpm=10)
    first = await a.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])
    assert first.status == 200
    used: Any = first.json()["usage"]["total_tokens"]
    assert 5 <= used < 10  # so that a second call is admitted and a third is not
    await asyncio.sleep(0.05)  # the settled tokens are added to Redis just after the answer
    second = await b.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])
    assert second.status == 200
    assert second.headers["x-ratelimit-remaining-tokens"] == str(10 - used)
    await asyncio.sleep(0.05)
    third = await c.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])
    assert third.status == 429, third.text
    assert "tokens per minute" in third.json()["error"]["message"]
