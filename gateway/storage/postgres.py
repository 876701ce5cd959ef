"""PostgreSQL backend (asyncpg pool).

Several gateway processes may share the database. Correctness comes from the statements
themselves: ``reserve`` is a conditional ``UPDATE ... WHERE balance_nano >= $1`` (row-locked, so
re-evaluated against the latest committed row under READ COMMITTED) together with the key update
and the ledger insert in one transaction; a reservation is closed by ``DELETE ... RETURNING``, so
exactly one transaction, in whichever process, gets to book it. Rows are locked in one global order
(see ``sql_money``); a deadlock or serialization failure that happens anyway is retried.

The SQL is shared with SQLite (``?`` placeholders, numbered here as ``$1, $2, ...``). Timestamps
used for heartbeats come from the database clock, so that processes on several hosts agree.

A database that cannot be reached (refused, cut, restarting, not answering within the connect
timeout) is a ``StorageUnavailable`` to the caller, a 503 ``service_unavailable`` with
``Retry-After`` and no stack trace; the outage is logged once (ERROR) and its end once. The pool's
connections are replaced after a cut (a restarted server closed them all), and a read that met a
dead connection is tried once more on a fresh one. A write is not: whether a cut transaction
committed is unknown, and the callers that retry writes (the batch writer, the group reserve)
do it knowing so.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from gateway.runtime.outage import Outage
from gateway.storage import sql_money as m
from gateway.storage.base import StorageUnavailable
from gateway.storage.sql_admin import SqlAdmin
from gateway.storage.sql_common import CLOSE_GRACE_S, POSTGRES

T = TypeVar("T")
log = logging.getLogger(__name__)
_RETRIES = 5
_TRANSIENT = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
CONNECT_TIMEOUT_S = 5.0  # a server that accepts no connection in this time is taken as down
# Class 08 (connection exception) and 57 (operator intervention: shutdown, cannot connect now).
_CUT = (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError)


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the server could not be reached, rather than that it refused a
    statement."""
    if isinstance(exc, (OSError, TimeoutError, *_CUT)):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


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


def _no_trace_for_cuts(record: logging.LogRecord) -> bool:
    """asyncpg's pool logs its failures to reconnect with a stack trace each; for an unreachable
    server the line alone says it (and the outage is logged once as ERROR here)."""
    if record.exc_info and record.exc_info[1] is not None and unreachable(record.exc_info[1]):
        cause = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        record.msg = f"{record.msg} ({cause.replace('%', '%%')})"
        record.exc_info, record.exc_text = None, None
    return True


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
    outage: Outage

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self.dsn, self._pool_min, self._pool_max = split_pool_options(dsn)
        self._pool: asyncpg.Pool | None = None
        self.outage = Outage("the database", log, logging.ERROR,
                             "calls are answered 503 service_unavailable until it is back")
        self._background: set[asyncio.Task[None]] = set()

    async def open(self) -> None:
        logging.getLogger("asyncpg.pool").addFilter(_no_trace_for_cuts)
        self._pool = await asyncpg.create_pool(self.dsn, min_size=self._pool_min, max_size=self._pool_max,
                                               timeout=CONNECT_TIMEOUT_S)
        await self._migrate()

    def _unavailable(self, exc: BaseException) -> StorageUnavailable:
        """Note the outage (logged once) and drop the pool's connections (after a server restart
        they are all dead: each would fail one call of its own)."""
        if self.outage.failed(exc) and self._pool is not None:
            expiring = asyncio.get_running_loop().create_task(self._pool.expire_connections())
            self._background.add(expiring)
            expiring.add_done_callback(self._background.discard)
        return StorageUnavailable()

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
            began = time.monotonic()
            try:
                async with self._acquire() as conn, conn.transaction():
                    result = await fn(_Tx(conn))
                self.outage.answered(began)
                return result
            except StorageUnavailable:
                raise
            except Exception as exc:
                if unreachable(exc):
                    raise self._unavailable(exc) from exc
                if not isinstance(exc, _TRANSIENT):
                    raise
                if attempt == _RETRIES - 1:
                    raise
                log.warning("postgres transaction conflict, retrying: %s", exc)
                await asyncio.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[m.Tx]:
        async with self._reachable(), self._acquire() as conn:
            yield _Tx(conn)

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[m.Tx]:
        async with self._reachable(), self._acquire() as conn, \
                conn.transaction(isolation="repeatable_read", readonly=True):
            yield _Tx(conn)

    @contextlib.asynccontextmanager
    async def _reachable(self) -> AsyncIterator[None]:
        began = time.monotonic()
        try:
            yield
        except StorageUnavailable:
            raise
        except Exception as exc:
            if unreachable(exc):
                raise self._unavailable(exc) from exc
            raise
        self.outage.answered(began)

    async def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """A single-statement read, tried once more on a fresh connection when the first met a
        dead one (a read changes nothing, so it is safe to repeat)."""
        try:
            return await super()._fetch(sql, args)
        except StorageUnavailable:
            return await super()._fetch(sql, args)
