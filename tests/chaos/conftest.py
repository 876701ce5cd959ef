"""The chaos tests' own services: one PostgreSQL cluster per module (a database per test) and one
Redis server per test, never the machine's. Needs ``initdb``/``pg_ctl`` and ``redis-server`` on
the PATH; with ``CI=true`` their absence is a failure, elsewhere a skip."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
import pytest_asyncio

from gateway.storage.testing import postgres_required
from tests.chaos.services import REDIS_SERVER, PostgresCluster, RedisServer


def _require(program: str) -> None:
    if shutil.which(program) is None:
        if postgres_required():
            pytest.fail(f"CI=true but {program} is not on the PATH")
        pytest.skip(f"{program} is not on the PATH")


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[PostgresCluster]:
    _require("initdb")
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest_asyncio.fixture
async def chaos_dsn(pg_cluster: PostgresCluster) -> AsyncIterator[str]:
    """A fresh database on the test's cluster (which the test may stop: it is started again)."""
    pg_cluster.resume()
    if not pg_cluster.running():  # an earlier test left it stopped
        pg_cluster.start()
    name = f"gw_chaos_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(pg_cluster.admin_dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    yield pg_cluster.dsn(name)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis server of the test's own, not started yet."""
    _require(REDIS_SERVER)
    server = RedisServer()
    try:
        yield server
    finally:
        server.close()
