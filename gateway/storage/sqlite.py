"""SQLite backend.

Writes: one writer connection in one dedicated thread. A whole write transaction (``BEGIN
IMMEDIATE`` ... ``COMMIT``, which also serialises against other processes sharing the file, with a
busy timeout) runs inside that thread in a single hop from the event loop: the shared transaction
functions of ``sql_money``/``sql_common`` are coroutines whose only awaits are ``Tx`` calls, and the
thread's ``Tx`` answers them without suspending, so the thread drives each function to its end at
once. (Statement by statement through aiosqlite, a reservation or a batch of settlements cost a
dozen thread hand-offs; this is the hot path of every metered call.)

The hot writes (the group commit of reservations and the batch of settlements and request logs,
both bounded in size) skip even that hop when the database is a file in ``synchronous=NORMAL`` (or
``OFF``): they run on the event loop, on a second writer connection whose busy timeout is 0, so a
commit never waits there. Such a transaction takes a fraction of a millisecond (no fsync at
commit in WAL mode), less than the hand-off to a thread and back, which also makes the two threads
contend for the GIL on every request. When another process holds the write lock the attempt fails
at once, is rolled back, and the same transaction runs in the writer thread, which waits for the
lock there (transactions are repeatable: see ``SqlStorage._write``). That connection never
checkpoints on commit (a checkpoint fsyncs); the writer thread runs a passive checkpoint every
``CHECKPOINT_EVERY`` hot commits instead. With ``synchronous=FULL`` every write uses the thread.

Reads: an aiosqlite connection beside the writer, which WAL mode lets run concurrently.

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
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from gateway.accounts.records import RequestLog
from gateway.storage import sql_money as m
from gateway.storage.rows import Settlement
from gateway.storage.shared_counter import SharedCounter
from gateway.storage.sql_admin import SqlAdmin
from gateway.storage.sql_common import AUTH_VERSION_SQL, CLOSE_GRACE_S, SQLITE

T = TypeVar("T")
log = logging.getLogger(__name__)
_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
_BUSY_RETRIES = 5
# Set while the batch writer's settle_many runs: its transaction is a hot one.
_HOT_WRITE: ContextVar[bool] = ContextVar("gateway_sqlite_hot_write", default=False)
CHECKPOINT_EVERY = 250  # hot (event-loop) commits between two passive checkpoints in the thread


class _Tx:
    """Statements through aiosqlite (the reader): each one a hop to its thread."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        cursor = await self._conn.execute(sql, args)
        return cursor.rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return list(await self._conn.execute_fetchall(sql, args))


class _ThreadTx:
    """Statements on the writer connection, called from inside its thread: these coroutines
    finish without ever suspending."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        return self._conn.execute(sql, args).rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return self._conn.execute(sql, args).fetchall()


def _run_to_end(coro: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (its awaits are all ``_ThreadTx`` calls)."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a write transaction awaited something other than its database calls")


class SqliteStorage(SqlAdmin):
    dialect = SQLITE

    def __init__(self, path: str, *, synchronous: str = "NORMAL", busy_timeout_ms: int = 10_000) -> None:
        super().__init__()
        if synchronous.upper() not in _SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNC_MODES)}")
        self.path = path
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = busy_timeout_ms
        self._writer: sqlite3.Connection | None = None
        self._hot: sqlite3.Connection | None = None  # on the event loop, busy timeout 0 (see above)
        self._hot_commits = 0
        self._thread: ThreadPoolExecutor | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()  # orders writes with the in-memory snapshot reads
        self._snapshot_lock = asyncio.Lock()
        self._reserves = m.GroupReserve(self._write_hot, self.dialect.now)
        self._auth_changes: SharedCounter | None = None  # the auth version, shared (see below)

    def _pragmas(self) -> list[str]:
        return [f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}", "PRAGMA journal_mode = WAL",
                f"PRAGMA synchronous = {self._synchronous}"]

    def _connect_writer(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        for pragma in self._pragmas():
            conn.execute(pragma)
        return conn

    def _connect_hot(self) -> sqlite3.Connection | None:
        """The event loop's writer connection, or None where every write must use the thread (an
        in-memory database lives in the one writer connection; FULL and EXTRA fsync every commit)."""
        if self.path == ":memory:" or self._synchronous not in ("OFF", "NORMAL"):
            return None
        conn = self._connect_writer()
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        return conn

    async def _connect_reader(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        conn.row_factory = sqlite3.Row
        for pragma in self._pragmas():
            await conn.execute(pragma)
        return conn

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        assert self._thread is not None, "storage is not open"
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    async def open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._writer = await self._in_thread(self._connect_writer)
        # An in-memory database exists only inside its one connection: reads go through the writer.
        self._reader = None if self.path == ":memory:" else await self._connect_reader()
        await self._migrate()
        self._hot = self._connect_hot()  # after the migrations: they may change the schema
        self._auth_changes = await self._in_thread(self._open_auth_changes)

    def _open_auth_changes(self) -> SharedCounter:
        """The shared auth version (see ``shared_auth_version``), set from the database in the
        writer thread: the file lock may be waited for there."""
        writer = self._writer
        assert writer is not None
        counter = SharedCounter(None if self.path == ":memory:" else f"{self.path}-changes")
        counter.reset(lambda: int(writer.execute(AUTH_VERSION_SQL).fetchone()[0]))
        return counter

    async def close(self) -> None:
        await self._reserves.close(CLOSE_GRACE_S)
        if self._reader is not None:
            await self._reader.close()
        if self._hot is not None:
            self._hot.close()
        if self._writer is not None:
            await self._in_thread(self._writer.close)
        if self._thread is not None:
            self._thread.shutdown(wait=True)
        if self._auth_changes is not None:
            self._auth_changes.close()
        self._writer = self._hot = self._reader = self._thread = self._auth_changes = None

    # --- transactions ----------------------------------------------------------------------------
    def _transaction(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T:
        """One whole transaction, inside the writer thread."""
        conn = self._writer
        assert conn is not None, "storage is not open"
        return self._transaction_on(conn, fn, _BUSY_RETRIES)

    @staticmethod
    def _transaction_on(conn: sqlite3.Connection, fn: Callable[[m.Tx], Awaitable[T]], tries: int) -> T:
        for attempt in range(tries):
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # busy beyond the timeout: another process
                if "locked" not in str(exc) or attempt == tries - 1:
                    raise
                log.warning("sqlite database busy, retrying: %s", exc)
                continue
            break
        try:
            result: T = _run_to_end(fn(_ThreadTx(conn)))  # type: ignore[arg-type]
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    async def _write(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T:
        if _HOT_WRITE.get():
            return await self._write_hot(fn)
        async with self._write_lock:
            return await self._in_thread(lambda: self._transaction(fn))

    async def _write_hot(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T:
        """A hot-path transaction (bounded in size): on the event loop when the lock is free (see
        the module's docstring), else in the writer thread like any other."""
        async with self._write_lock:
            hot = self._hot
            if hot is not None:
                try:
                    result = self._transaction_on(hot, fn, 1)
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) and "busy" not in str(exc):
                        raise
                    # Another process writes: rolled back; wait for the lock in the thread.
                else:
                    self._hot_commits += 1
                    if self._hot_commits % CHECKPOINT_EVERY == 0:
                        self._checkpoint_soon()
                    return result
            return await self._in_thread(lambda: self._transaction(fn))

    # --- the auth version, shared in memory ------------------------------------------------------
    # Every process on this database file keeps the auth version in a ``SharedCounter`` beside it,
    # raised by whoever commits a change: the calls held from quota leases read it there, not in
    # the database. A process killed between its commit and raising the counter leaves it behind
    # the database until any process next reads the version from the database (the auth caches
    # poll it every ``Authenticator.poll_interval_s``), which raises it.
    def shared_auth_version(self) -> int | None:
        return self._auth_changes.value if self._auth_changes is not None else None

    async def auth_version(self) -> int:
        """Read on the event loop's connection where there is one: a one-row read of a local file
        costs microseconds, less than the hop to the reader's thread."""
        if self._hot is None:
            return self._shared(await super().auth_version())
        return self._shared(int(self._hot.execute(AUTH_VERSION_SQL).fetchone()["value"]))

    async def bump_auth_version(self) -> int:
        return self._shared(await super().bump_auth_version())

    def _shared(self, version: int) -> int:
        """``version``, read from or committed to the database, raised into the shared counter."""
        if self._auth_changes is not None:
            self._auth_changes.raise_to(version)
        return version

    def _checkpoint_soon(self) -> None:
        """A passive checkpoint in the writer thread (it never blocks a writer); its outcome only
        matters to the size of the WAL file, so a failure is logged and left to the next one."""
        writer = self._writer
        if writer is None or self._thread is None:
            return

        def checkpoint() -> None:
            try:
                writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:
                log.warning("sqlite checkpoint failed: %s", exc)

        self._thread.submit(checkpoint)

    async def settle_many(self, settlements: Sequence[Settlement], logs: Sequence[RequestLog] = ()) -> None:
        """The batch writer's transaction, on the hot path (``_write_hot``)."""
        token = _HOT_WRITE.set(True)
        try:
            await super().settle_many(settlements, logs)
        finally:
            _HOT_WRITE.reset(token)

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[m.Tx]:
        if self._reader is None:  # in-memory
            async with self._snapshot() as tx:
                yield tx
            return
        yield _Tx(self._reader)

    @contextlib.asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[m.Tx]:
        if self._reader is None:  # in-memory: reads run in the writer thread, between writes
            async with self._write_lock:
                yield _WriterReads(self)
            return
        async with self._snapshot_lock:
            await self._reader.execute("BEGIN")
            try:
                yield _Tx(self._reader)
            finally:
                await self._reader.execute("COMMIT")


class _WriterReads:
    """Reads of an in-memory database: each statement a hop to the writer thread."""

    def __init__(self, storage: SqliteStorage) -> None:
        self._storage = storage

    def _conn(self) -> sqlite3.Connection:
        assert self._storage._writer is not None, "storage is not open"
        return self._storage._writer

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        return await self._storage._in_thread(lambda: self._conn().execute(sql, args).rowcount)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._storage._in_thread(lambda: self._conn().executemany(sql, rows))

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        return await self._storage._in_thread(lambda: self._conn().execute(sql, args).fetchall())
