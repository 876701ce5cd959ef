"""Servers for the rate-limit tests: a PostgreSQL database per test and the Redis server (db 13).

With ``CI=true`` an unreachable server is a failure; otherwise those tests are skipped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from gateway.storage.testing import (
    database_url,
    fresh_database,
    new_principal,
    pg_database,
    postgres_required,
    storage,
)

__all__ = ["database_url", "new_principal", "pg_database", "pg_dsn", "redis_url", "storage"]

REDIS_URL = "redis://127.0.0.1:6379/13"  # keys are named by key hash and expire after a minute


@pytest_asyncio.fixture
async def pg_dsn() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for the test, dropped after it (request it before any gateway
    fixture so that the gateways stop first)."""
    async for dsn in fresh_database("gw_ratelimit"):
        yield dsn


@pytest_asyncio.fixture
async def redis_url() -> str:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        if postgres_required():  # CI=true
            pytest.fail(f"CI=true but Redis is unreachable: {exc}")
        pytest.skip(f"Redis is not reachable: {exc}")
    finally:
        await client.aclose()
    return REDIS_URL
