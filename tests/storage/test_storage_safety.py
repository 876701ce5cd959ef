"""Secrets never stored in plaintext; correctness with several processes sharing one database."""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from pathlib import Path

import aiosqlite
import asyncpg

from gateway.accounts.records import KeyRecord
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.postgres import numbered, split_pool_options
from gateway.storage.rows import Reservation, Settlement
from gateway.storage.testing import NewPrincipal


async def dump_everything(database_url: str) -> str:
    """Every row of every table, as text (plus, for SQLite, the raw bytes of the files)."""
    out: list[str] = []
    if database_url.startswith("sqlite:///"):
        path = database_url[len("sqlite:///"):]
        async with aiosqlite.connect(path) as conn:
            tables = [r[0] for r in await conn.execute_fetchall(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                out += [repr(tuple(r)) for r in await conn.execute_fetchall(f'SELECT * FROM "{table}"')]
        for file in Path(path).parent.glob(Path(path).name + "*"):
            out.append(file.read_bytes().decode("latin-1"))
    else:
        conn = await asyncpg.connect(database_url)
        try:
            tables = [r["table_name"] for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
            for table in tables:
                out += [repr(tuple(r.values())) for r in await conn.fetch(f'SELECT * FROM "{table}"')]
        finally:
            await conn.close()
    assert out
    return "\n".join(out)


async def test_no_plaintext_credentials(storage: Storage, database_url: str) -> None:
    token = "ut-" + secrets.token_urlsafe(30)
    api_key = "sk-" + secrets.token_urlsafe(36)
    user = await storage.create_user("u", "default", 100, hashlib.sha256(token.encode()).hexdigest(), "r")
    key_hash = hashlib.sha256(api_key.encode()).hexdigest()
    await storage.create_key(KeyRecord(id=0, user_id=user.id, name="k", key_hash=key_hash,
                                       masked=f"sk-{api_key[3:7]}...{api_key[-4:]}"))
    assert (await storage.key_by_hash(key_hash)) is not None
    dump = await dump_everything(database_url)
    assert key_hash in dump
    assert api_key not in dump and api_key[3:] not in dump
    assert token not in dump and token[3:] not in dump


async def test_two_processes_share_the_database(storage: Storage, new_principal: NewPrincipal,
                                                database_url: str) -> None:
    """Two independent stores (as two gateway processes would hold) race for one key's ceiling."""
    p = await new_principal(balance_nano=10_000, quota_nano=1_000)
    other = open_storage(database_url)
    await other.open()
    try:
        stores = [storage, other]

        async def attempt(i: int) -> bool:
            r = Reservation(f"r{i}", p.user.id, p.key.id, 100, f"proc-{i % 2}")
            ok = await stores[i % 2].reserve(r)
            if ok:
                await stores[(i + 1) % 2].settle_many([Settlement(r, 100)])
            return ok

        results = await asyncio.gather(*(attempt(i) for i in range(60)))
        assert sum(results) == 10
        key = await other.get_key(p.key.id)
        user = await storage.get_user(p.user.id)
        assert key is not None and user is not None
        assert (key.spent_nano, key.reserved_nano, user.balance_nano) == (1_000, 0, 9_000)
        assert await other.audit() == []
    finally:
        await other.close()


def test_placeholders_numbered_for_postgres() -> None:
    assert numbered("UPDATE t SET a = ? WHERE b >= ?") == "UPDATE t SET a = $1 WHERE b >= $2"
    assert numbered("SELECT 1") == "SELECT 1"
    dsn, low, high = split_pool_options("postgresql://u@h/db?pool_max=3&search_path=s")
    assert (dsn, low, high) == ("postgresql://u@h/db?search_path=s", 1, 3)
