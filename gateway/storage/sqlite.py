"""SQLite backend (aiosqlite).

Connections: one writer connection, through which every write transaction goes one at a time
(an ``asyncio.Lock`` plus ``BEGIN IMMEDIATE``, which also serialises against other processes
sharing the file, with a busy timeout), and one reader connection for reads, which WAL mode lets
run beside the writer. aiosqlite runs each connection in its own thread, so the event loop never
blocks on the database.

Durability: ``journal_mode=WAL`` with ``synchronous=NORMAL`` by default. A committed transaction
survives a crash of the process (kill -9) but the last few may be lost if the machine itself loses
power; the database is still consistent then (balances always match the ledger, because both are
written in the same transaction). Use ``sqlite:///path?synchronous=FULL`` to fsync every commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from gateway.storage import sql_money as m
from gateway.storage.sql_common import SQLITE, SqlStorage

T = TypeVar("T")
log = logging.getLogger(__name__)
_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
_BUSY_RETRIES = 5


class _Tx:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        cursor = await self._conn.execute(sql, args)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return list(await self._conn.execute_fetchall(sql, args))


class SqliteStorage(SqlStorage):
    dialect = SQLITE

    def __init__(self, path: str, *, synchronous: str = "NORMAL", busy_timeout_ms: int = 10_000) -> None:
        super().__init__()
        if synchronous.upper() not in _SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNC_MODES)}")
        self.path = path
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = busy_timeout_ms
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()
        self._snapshot_lock = asyncio.Lock()

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        await conn.execute("PRAGMA journal_mode = WAL")
        await conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        return conn

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._writer = await self._connect()
        # An in-memory database exists only inside its one connection.
        self._reader = self._writer if self.path == ":memory:" else await self._connect()
        await self._migrate()

    async def close(self) -> None:
        await self._reserves.close()
        for conn in {id(c): c for c in (self._reader, self._writer) if c is not None}.values():
            await conn.close()
        self._writer = self._reader = None

    # --- transactions ----------------------------------------------------------------------------
    async def _transaction(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T:
        """One transaction on the writer connection; the caller holds ``_write_lock``."""
        assert self._writer is not None, "storage is not open"
        for attempt in range(_BUSY_RETRIES):
            try:
                await self._writer.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # busy beyond the timeout: another process
                if "locked" not in str(exc) or attempt == _BUSY_RETRIES - 1:
                    raise
                log.warning("sqlite database busy, retrying: %s", exc)
                continue
            break
        try:
            result = await fn(_Tx(self._writer))
            await self._writer.execute("COMMIT")
        except BaseException:
            if self._writer.in_transaction:
                await self._writer.execute("ROLLBACK")
            raise
        return result

    async def _write(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T:
        async with self._write_lock:
            return await self._transaction(fn)

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[m.Tx]:
        assert self._reader is not None, "storage is not open"
        yield _Tx(self._reader)

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[m.Tx]:
        assert self._reader is not None, "storage is not open"
        if self._reader is self._writer:  # in-memory: reads go through the write lock
            async with self._write_lock:
                yield _Tx(self._reader)
            return
        async with self._snapshot_lock:
            await self._reader.execute("BEGIN")
            try:
                yield _Tx(self._reader)
            finally:
                await self._reader.execute("COMMIT")
