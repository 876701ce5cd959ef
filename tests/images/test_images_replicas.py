"""The Images API over two replicas on one PostgreSQL database and one Redis: 50 generations at
once, split over both, under a key ceiling, never spend past it, and the books balance (each
served call charged ``per_image`` times the images it returned, no hold left, the audit clean).

Each run gets a PostgreSQL database of its own, dropped afterwards; Redis db 14 carries only the
auth channel. With ``CI=true`` an unreachable server is a failure; otherwise the test is skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from gateway.accounts.metering.audit import run_audit
from gateway.storage.testing import fresh_database, postgres_required

from .conftest import START_NANO, images_config
from .test_images_money import LIMIT_USD, check_books, fire

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import MakeConfig, StartGateway

pytestmark = pytest.mark.postgres

REDIS_URL = "redis://127.0.0.1:6379/14"


@pytest_asyncio.fixture
async def pg_dsn() -> AsyncIterator[str]:
    async for dsn in fresh_database("gw_images"):
        yield dsn


async def _require_redis() -> None:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        if postgres_required():
            pytest.fail(f"CI=true but Redis is unreachable: {exc}")
        pytest.skip(f"Redis is not reachable: {exc}")
    finally:
        await client.aclose()


async def test_fifty_generations_over_two_replicas_keep_the_books(
    pg_dsn: str, gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    await _require_redis()
    config = images_config(
        make_config,
        simulator.base_url,
        database=pg_dsn,
        redis=REDIS_URL,
        metering={"heartbeat_s": 0.5, "stale_after_s": 2.0},
    )
    a = await gateway_server(config)
    b = await gateway_server(config)
    user = await a.create_user(quota_usd=START_NANO / 1e9)
    key = await b.create_key(user["id"], name="ceiling", quota_usd=LIMIT_USD)
    ended = await fire([a.base_url, b.base_url], key["key"])
    await a.gateway.meter.flush()
    await b.gateway.meter.flush()

    storage = a.gateway.storage
    rows = (await storage.log_page(user["id"], 1, 200)).items
    logs = [{"status": row.status, "charge_nano": row.charge_nano} for row in rows]
    spent = check_books(ended, logs, "insufficient_quota")
    stored_key = await storage.get_key(key["id"])
    stored_user = await storage.get_user(user["id"])
    assert stored_key is not None and stored_user is not None
    assert stored_key.spent_nano == spent
    assert stored_user.balance_nano == START_NANO - spent
    await a.gateway.meter.flush(return_leases=True)
    await b.gateway.meter.flush(return_leases=True)
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []
