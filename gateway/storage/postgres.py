"""PostgreSQL backend (asyncpg pool).

Several gateway processes may share the database. Correctness comes from the statements
themselves: ``reserve`` is a conditional ``UPDATE ... WHERE balance_nano >= $1`` (row-locked, so
re-evaluated against the latest committed row under READ COMMITTED) together with the key update
and the ledger insert in one transaction; a reservation is closed by ``DELETE ... RETURNING``, so
exactly one transaction, in whichever process, gets to book it. Rows are locked in one global order
(see ``sql_money``); a deadlock or serialization failure that happens anyway is retried.

The SQL is shared with SQLite (``?`` placeholders, numbered here as ``$1, $2, ...``). Timestamps
used for heartbeats come from the database clock, so that processes on several hosts agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from gateway.storage import sql_money as m
from gateway.storage.sql_admin import SqlAdmin
from gateway.storage.sql_common import CLOSE_GRACE_S, POSTGRES

T = TypeVar("T")
log = logging.getLogger(__name__)
_RETRIES = 5
_TRANSIENT = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)


@functools.lru_cache(maxsize=1024)
def numbered(sql: str) -> str:
    """``?`` placeholders to ``$1, $2, ...`` (the shared SQL has no ``?`` inside literals)."""
    parts = sql.split("?")
    out = [parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        out.append(f"${i}{part}")
    return "".join(out)


def _clean(args: Sequence[Any]) -> list[Any]:
    # PostgreSQL text cannot hold NUL; client-supplied strings (model names, ...) might.
    return [a.replace("\x00", "") if type(a) is str and "\x00" in a else a for a in args]


class _Tx:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        status = await self._conn.execute(numbered(sql), *_clean(args))
        last = status.rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [_clean(r) for r in rows]
        if rows:
            await self._conn.executemany(numbered(sql), rows)

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        rows: list[Any] = await self._conn.fetch(numbered(sql), *_clean(args))
        return rows


def split_pool_options(dsn: str) -> tuple[str, int, int]:
    """``pool_min``/``pool_max`` query parameters are ours; the rest of the DSN goes to asyncpg
    (which passes unknown parameters, e.g. ``search_path``, on as server settings)."""
    parts = urlsplit(dsn)
    query = dict(parse_qsl(parts.query))
    pool_min = int(query.pop("pool_min", 1))
    pool_max = int(query.pop("pool_max", 10))
    return urlunsplit(parts._replace(query=urlencode(query))), pool_min, pool_max


class PostgresStorage(SqlAdmin):
    dialect = POSTGRES

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn, self._pool_min, self._pool_max = split_pool_options(dsn)
        self._pool: asyncpg.Pool | None = None

    async def open(self) -> None:
        self._pool = await asyncpg.create_pool(self.dsn, min_size=self._pool_min, max_size=self._pool_max)
        await self._migrate()

    async def close(self) -> None:
        await self._reserves.close(CLOSE_GRACE_S)
        if self._pool is not None:
            pool, self._pool = self._pool, None
            # asyncpg waits for every connection to come back; one held by a task that never ends
            # would hold the shutdown for ever, so after a grace period the rest are cut.
            try:
                await asyncio.wait_for(pool.close(), CLOSE_GRACE_S)
            except TimeoutError:
                log.warning("connections still in use %gs into shutdown; terminating them", CLOSE_GRACE_S)
                pool.terminate()

    def _acquire(self) -> Any:
        assert self._pool is not None, "storage is not open"
        return self._pool.acquire()

    async def _write(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T:
        for attempt in range(_RETRIES):
            try:
                async with self._acquire() as conn, conn.transaction():
                    return await fn(_Tx(conn))
            except _TRANSIENT as exc:
                if attempt == _RETRIES - 1:
                    raise
                log.warning("postgres transaction conflict, retrying: %s", exc)
                await asyncio.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[m.Tx]:
        async with self._acquire() as conn:
            yield _Tx(conn)

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[m.Tx]:
        async with self._acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            yield _Tx(conn)
