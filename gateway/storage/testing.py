"""Test helpers (imported by test suites only; needs pytest): throw-away PostgreSQL databases and
schemas, and fixtures that run a test on both backends.

Import the fixtures into a ``conftest.py``::

    from gateway.storage.testing import database_url, new_principal, pg_database, storage  # noqa: F401

``storage`` is then an open store on SQLite (a file in ``tmp_path``) and, as a second
parametrisation marked ``postgres``, on PostgreSQL (a fresh schema in a database created for the
session and dropped at its end). With ``CI=true`` the PostgreSQL runs are required; elsewhere they
are skipped when no server answers. The server comes from ``GATEWAY_TEST_POSTGRES`` (an admin DSN;
default ``postgresql://postgres@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio

from gateway.accounts.records import KeyRecord, Principal, RequestLog
from gateway.storage import open_storage
from gateway.storage.base import Storage

NewPrincipal = Callable[..., Awaitable[Principal]]

DEFAULT_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin_dsn() -> str:
    return os.environ.get("GATEWAY_TEST_POSTGRES", DEFAULT_ADMIN_DSN)


def postgres_required() -> bool:
    """On CI the PostgreSQL tests must run: an unreachable server is a failure, not a skip."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def with_database(dsn: str, database: str, query: str = "") -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}", query=query))


async def postgres_error(dsn: str | None = None) -> str | None:
    """None when the server answers, else why not."""
    try:
        conn = await asyncpg.connect(dsn or admin_dsn(), timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


async def create_database(prefix: str = "gw_test") -> str:
    """A new empty database; returns its DSN."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(admin_dsn())
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return with_database(admin_dsn(), name)


async def drop_database(dsn: str) -> None:
    name = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(admin_dsn())
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


async def fresh_database(prefix: str) -> AsyncIterator[str]:
    """The body of a fixture giving a test a database of its own, dropped after it: skipped when no
    server answers, a failure when ``CI=true``. Use as ``async for dsn in fresh_database(...)``
    inside an async generator fixture (``yield dsn``)."""
    error = await postgres_error()
    if error is not None:
        if postgres_required():
            pytest.fail(f"CI=true but PostgreSQL is unreachable: {error}")
        pytest.skip(f"PostgreSQL is not reachable: {error}")
    dsn = await create_database(prefix)
    try:
        yield dsn
    finally:
        await drop_database(dsn)


async def create_schema(database_dsn: str, prefix: str = "t") -> str:
    """A new schema in the database; returns a DSN whose connections use it (``search_path``)."""
    name = f"{prefix}_{secrets.token_hex(6)}"
    conn = await asyncpg.connect(database_dsn)
    try:
        await conn.execute(f'CREATE SCHEMA "{name}"')
    finally:
        await conn.close()
    return f"{database_dsn}?search_path={name}"


# --- fixtures ----------------------------------------------------------------------------------------
@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def pg_database() -> AsyncIterator[str | None]:
    """DSN of a database made for this session, or None when PostgreSQL is unreachable (not CI)."""
    error = await postgres_error()
    if error is not None:
        if postgres_required():
            pytest.fail(f"CI=true but PostgreSQL is unreachable: {error}")
        yield None
        return
    dsn = await create_database()
    yield dsn
    await drop_database(dsn)


@pytest_asyncio.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path, pg_database: str | None) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/gateway.db"
    if pg_database is None:
        pytest.skip("PostgreSQL is not reachable (set CI=true to make this a failure)")
    return await create_schema(pg_database)


@pytest_asyncio.fixture
async def storage(database_url: str) -> AsyncIterator[Storage]:
    store = open_storage(database_url)
    await store.open()
    yield store
    await store.close()


@pytest.fixture
def new_principal(storage: Storage) -> NewPrincipal:
    """``await new_principal(balance_nano, quota_nano=None, enabled=True)``: a new user with that
    balance and a key of theirs with that ceiling."""

    async def make(balance_nano: int = 1_000_000, quota_nano: int | None = None,
                   enabled: bool = True) -> Principal:
        user = await storage.create_user(f"u-{secrets.token_hex(4)}", "default", balance_nano,
                                         hashlib.sha256(secrets.token_bytes(16)).hexdigest(), "topup-1")
        secret = "sk-" + secrets.token_hex(16)
        key = await storage.create_key(KeyRecord(
            id=0, user_id=user.id, name="k", key_hash=hashlib.sha256(secret.encode()).hexdigest(),
            masked=f"{secret[:7]}...{secret[-4:]}", enabled=enabled, quota_nano=quota_nano))
        return Principal(key=key, user=user, client_ip="127.0.0.1")

    return make


def sample_log(principal: Principal, request_id: str, **fields: Any) -> RequestLog:
    """A request log of a served chat call by ``principal``; ``fields`` override."""
    values: dict[str, Any] = {
        "request_id": request_id, "created_at": time.time(), "user_id": principal.user.id,
        "key_id": principal.key.id, "token_name": principal.key.name, "route": "/probe/generate",
        "family": "chat", "model": "sim-chat", "status": 200, "outcome": "success", "is_stream": True,
        "upstream": "sim", "attempts": 1, "prompt_tokens": 10, "completion_tokens": 20,
        "cache_read_tokens": 3, "usage_estimated": True, "use_time_ms": 42, "first_byte_ms": 7,
        "ip": "10.0.0.1"}
    values.update(fields)
    return RequestLog(**values)
