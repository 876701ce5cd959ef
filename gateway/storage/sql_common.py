"""The storage interface implemented once in SQL for both backends.

A backend (``sqlite.py``, ``postgres.py``) only supplies connections and transactions (``_write``,
``_read``, ``_snapshot``) and a ``Dialect``: a few SQL snippets that differ (primary keys, the
database clock, UTC day of a timestamp). Every statement is written here with ``?`` placeholders,
parameterised; the PostgreSQL backend numbers them ``$1, $2, ...``. Money transactions live in
``sql_money``, including the group commit of ``reserve`` (``GroupReserve``).
"""

from __future__ import annotations

import asyncio
import time
from abc import abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import msgspec
import orjson

from gateway.accounts.records import KeyRecord, RequestLog, UserRecord
from gateway.storage import sql_money as m
from gateway.storage.base import Storage
from gateway.storage.migrations import load_migrations
from gateway.storage.rows import (
    DURABLE_HOLDER,
    LEASE_PREFIX,
    AuditProblem,
    DailyCost,
    KeyChanges,
    LogPage,
    Reservation,
    Settlement,
    UnchargedEntry,
)
from gateway.storage.sql_audit import audit_in_tx
from gateway.storage.sql_budget import BUDGET_COLUMNS, budget_fields
from gateway.storage.sql_cache import SqlResponseCache
from gateway.storage.sql_dialect import POSTGRES as POSTGRES
from gateway.storage.sql_dialect import SQLITE as SQLITE
from gateway.storage.sql_dialect import Dialect
from gateway.storage.sql_documents import SqlDocuments
from gateway.storage.sql_idempotency import SqlIdempotency
from gateway.storage.sql_request_log import LOG_FIELDS, insert_logs, log_from_row
from gateway.storage.sql_tasks import SqlTaskStore

T = TypeVar("T")
# How long closing waits for work in progress (a batch, a connection in use) before cutting it.
CLOSE_GRACE_S = 10.0
Tx = m.Tx
Row = m.Row


_USER_COLUMNS = ("id, name, user_group, balance_nano, used_nano, request_count, created_at, enabled, "
                 f"soft_limit_nano, reserved_nano, {BUDGET_COLUMNS}")
_LIVE = "deleted_at IS NULL"  # a deleted user keeps its row (ledger, logs) but is gone otherwise
_KEY_COLUMNS = ("id, user_id, name, key_hash, masked, enabled, quota_nano, spent_nano, reserved_nano, "
                f"models, allow_ips, expires_at, created_at, rpm, tpm, soft_limit_nano, cache_responses, "
                f"{BUDGET_COLUMNS}")
_KEY_EDITABLE = frozenset(KeyChanges.__struct_fields__)
# A durable hold (a media task's) has no process to outlive: its task closes it.
_ORPHANED = ("created_at < {now} - ? AND instance <> '" + DURABLE_HOLDER + "' AND NOT EXISTS ("
             "SELECT 1 FROM instances i WHERE i.instance = reservations.instance"
             " AND i.last_seen >= {now} - ?)")


# An instance silent this long is gone for good (its holds were released long ago): its row goes.
# A process that comes back after all writes its row again with its next heartbeat.
INSTANCE_ROWS_KEPT_S = 3600.0
_PRUNE_INSTANCES = ("DELETE FROM instances WHERE last_seen < {now} - ? AND NOT EXISTS ("
                    "SELECT 1 FROM reservations r WHERE r.instance = instances.instance)")


def _user(row: Row) -> UserRecord:
    return UserRecord(id=row["id"], name=row["name"], group=row["user_group"],
                      balance_nano=row["balance_nano"], used_nano=row["used_nano"],
                      request_count=row["request_count"], created_at=row["created_at"],
                      enabled=bool(row["enabled"]), soft_limit_nano=row["soft_limit_nano"],
                      reserved_nano=row["reserved_nano"], **budget_fields(row))


def _json_list(text: str | None) -> list[str] | None:
    return None if text is None else orjson.loads(text)


def _dump_list(value: list[str] | None) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _key(row: Row) -> KeyRecord:
    return KeyRecord(id=row["id"], user_id=row["user_id"], name=row["name"], key_hash=row["key_hash"],
                     masked=row["masked"], enabled=bool(row["enabled"]), quota_nano=row["quota_nano"],
                     spent_nano=row["spent_nano"], reserved_nano=row["reserved_nano"],
                     models=_json_list(row["models"]), allow_ips=_json_list(row["allow_ips"]),
                     expires_at=row["expires_at"], created_at=row["created_at"], rpm=row["rpm"],
                     tpm=row["tpm"], soft_limit_nano=row["soft_limit_nano"],
                     cache_responses=bool(row["cache_responses"]), **budget_fields(row))


AUTH_VERSION_SQL = "SELECT value FROM meta WHERE name = 'auth_version'"


def _reservation(row: Row) -> Reservation:
    return Reservation(request_id=row["request_id"], user_id=row["user_id"], key_id=row["key_id"],
                       amount_nano=row["amount_nano"], instance=row["instance"])


class SqlStorage(SqlDocuments, SqlIdempotency, SqlResponseCache, SqlTaskStore, Storage):
    dialect: Dialect

    def __init__(self) -> None:
        self._reserves = m.GroupReserve(self._write, self.dialect.now)

    # --- what a backend supplies -------------------------------------------------------------------
    @abstractmethod
    async def _write(self, fn: Callable[[Tx], Awaitable[T]]) -> T:
        """Run ``fn`` in one write transaction: committed when it returns, rolled back when it
        raises. Retried on transient conflicts (deadlock, busy), so ``fn`` must be repeatable."""

    @abstractmethod
    def _read(self) -> AbstractAsyncContextManager[Tx]:
        """A connection for single-statement reads (no transaction needed)."""

    @abstractmethod
    def _snapshot(self) -> AbstractAsyncContextManager[Tx]:
        """A read-only transaction: several statements see one consistent state."""

    def _sql(self, sql: str) -> str:
        return sql.replace("{now}", self.dialect.now)

    async def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        async with self._read() as tx:
            return await tx.fetchall(sql, args)

    async def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        rows = await self._fetch(sql, args)
        return rows[0] if rows else None

    async def _migrate(self) -> None:
        async def apply(tx: Tx) -> None:
            if self.dialect.migration_lock:
                await tx.execute(self.dialect.migration_lock)
            await tx.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                             "name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)")
            done = {r["version"] for r in await tx.fetchall("SELECT version FROM schema_migrations")}
            for migration in load_migrations():
                if migration.version in done:
                    continue
                for statement in migration.statements(self.dialect.pk, self.dialect.without_rowid):
                    await tx.execute(statement)
                await tx.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                                 (migration.version, migration.name, time.time()))

        await self._write(apply)

    async def schema_version(self) -> int:
        row = await self._fetch_one("SELECT MAX(version) AS v FROM schema_migrations")
        return row["v"] or 0

    # --- users -----------------------------------------------------------------------------------
    async def create_user(self, name: str, group: str, balance_nano: int, token_hash: str,
                          request_id: str) -> UserRecord:
        async def fn(tx: Tx) -> UserRecord:
            rows = await tx.fetchall(
                "INSERT INTO users (name, user_group, token_hash, balance_nano, created_at) "
                f"VALUES (?, ?, ?, ?, ?) RETURNING {_USER_COLUMNS}",
                (name, group, token_hash, balance_nano, int(time.time())))
            user = _user(rows[0])
            await tx.execute(m.INSERT_LEDGER, (time.time(), "topup", request_id, user.id, None,
                                               balance_nano, 0, 0))
            await self._bump(tx)
            return user

        return await self._write(fn)

    async def get_user(self, user_id: int) -> UserRecord | None:
        row = await self._fetch_one(f"SELECT {_USER_COLUMNS} FROM users WHERE id = ? AND {_LIVE}",
                                    (user_id,))
        return _user(row) if row else None

    async def user_by_token_hash(self, token_hash: str) -> UserRecord | None:
        row = await self._fetch_one(f"SELECT {_USER_COLUMNS} FROM users WHERE token_hash = ? AND {_LIVE}",
                                    (token_hash,))
        return _user(row) if row else None

    async def list_users(self) -> list[UserRecord]:
        rows = await self._fetch(f"SELECT {_USER_COLUMNS} FROM users WHERE {_LIVE} ORDER BY id")
        return [_user(r) for r in rows]

    async def count_users(self) -> int:
        return int((await self._fetch_one("SELECT COUNT(*) AS n FROM users"))["n"])

    async def topup(self, user_id: int, amount_nano: int, request_id: str) -> UserRecord | None:
        """A negative amount deducts, but never below zero (None then, as for an unknown user)."""
        async def fn(tx: Tx) -> UserRecord | None:
            rows = await tx.fetchall(
                "UPDATE users SET balance_nano = balance_nano + ? WHERE id = ? AND balance_nano + ? >= 0 "
                f"AND {_LIVE} "
                f"RETURNING {_USER_COLUMNS}", (amount_nano, user_id, amount_nano))
            if not rows:
                return None
            await tx.execute(m.INSERT_LEDGER, (time.time(), "topup", request_id, user_id, None,
                                               amount_nano, 0, 0))
            await self._bump(tx)
            return _user(rows[0])

        return await self._write(fn)

    # --- keys ------------------------------------------------------------------------------------
    async def create_key(self, key: KeyRecord) -> KeyRecord:
        async def fn(tx: Tx) -> KeyRecord:
            rows = await tx.fetchall(
                "INSERT INTO api_keys (user_id, name, key_hash, masked, enabled, quota_nano, models, "
                "allow_ips, expires_at, created_at, rpm, tpm, soft_limit_nano, budget_nano, budget_period, "
                "cache_responses) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                f"RETURNING {_KEY_COLUMNS}",
                (key.user_id, key.name, key.key_hash, key.masked, key.enabled, key.quota_nano,
                 _dump_list(key.models), _dump_list(key.allow_ips), key.expires_at,
                 key.created_at or int(time.time()), key.rpm, key.tpm, key.soft_limit_nano,
                 key.budget_nano, key.budget_period, key.cache_responses))
            await self._bump(tx)
            return _key(rows[0])

        return await self._write(fn)

    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyRecord | None:
        values = msgspec.structs.asdict(changes)
        sets = {f: v for f, v in values.items() if v is not msgspec.UNSET and f in _KEY_EDITABLE}
        if not sets:
            return await self.get_key(key_id)
        for f in ("models", "allow_ips"):
            if f in sets:
                sets[f] = _dump_list(sets[f])

        async def fn(tx: Tx) -> KeyRecord | None:
            rows = await tx.fetchall(
                f"UPDATE api_keys SET {', '.join(f'{f} = ?' for f in sets)} WHERE id = ? "
                f"RETURNING {_KEY_COLUMNS}", (*sets.values(), key_id))
            if rows:
                await self._bump(tx)
            return _key(rows[0]) if rows else None

        return await self._write(fn)

    async def delete_key(self, key_id: int) -> bool:
        """Deletes the row; its ledger rows and request logs stay. Reservations still open on it
        settle normally (the user's balance part)."""
        async def fn(tx: Tx) -> bool:
            deleted = await tx.execute("DELETE FROM api_keys WHERE id = ?", (key_id,))
            if deleted:
                await self._bump(tx)
            return bool(deleted)

        return await self._write(fn)

    async def get_key(self, key_id: int) -> KeyRecord | None:
        row = await self._fetch_one(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return _key(row) if row else None

    async def key_by_hash(self, key_hash: str) -> KeyRecord | None:
        row = await self._fetch_one(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = ?", (key_hash,))
        return _key(row) if row else None

    async def list_keys(self, user_id: int | None = None) -> list[KeyRecord]:
        if user_id is None:
            rows = await self._fetch(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY id")
        else:
            rows = await self._fetch(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE user_id = ? ORDER BY id",
                                     (user_id,))
        return [_key(r) for r in rows]

    # --- money -----------------------------------------------------------------------------------
    async def reserve(self, reservation: Reservation, room_nano: int | None = None) -> bool:
        return await self._reserves.reserve(reservation, room_nano)

    def reserve_soon(self, reservation: Reservation) -> asyncio.Future[bool]:
        return self._reserves.submit(reservation)

    async def settle_many(self, settlements: Sequence[Settlement],
                          logs: Sequence[RequestLog] = ()) -> None:
        wanted: dict[str, Settlement] = {}  # holds of their own, by request id
        carved: list[Settlement] = []  # holds carved from quota leases, each one closed
        for s in settlements:
            if s.reservation.lease is None:
                wanted.setdefault(s.reservation.request_id, s)
            else:
                carved.append(s)
        if not wanted and not carved and not logs:
            return
        returns = {s.reservation.request_id for s in carved
                   if s.reservation.lease == s.reservation.request_id}  # leases giving back

        async def fn(tx: Tx) -> None:
            closed = []
            for row in await m.delete_reservations(tx, list(wanted)):
                s = wanted[row["request_id"]]
                closed.append((row, max(s.charge_nano, 0), s.log))  # above the hold: see book_closures
            if carved:
                closed += await m.close_from_leases(tx, carved)
            await m.book_closures(tx, closed, count_requests=True, release_kind="release",
                                  uncounted=returns)
            await insert_logs(tx, logs)

        await self._write(fn)

    async def heartbeat(self, instance: str) -> None:
        await self._write(lambda tx: tx.execute(self._sql(
            "INSERT INTO instances (instance, started_at, last_seen) VALUES (?, {now}, {now}) "
            "ON CONFLICT (instance) DO UPDATE SET last_seen = {now}"), (instance,)))

    async def release_orphaned_reservations(self, stale_after_s: float) -> int:
        stale = float(stale_after_s)

        async def fn(tx: Tx) -> int:
            released = await m.release_where(tx, self._sql(_ORPHANED), (stale, stale))
            await tx.execute(self._sql(_PRUNE_INSTANCES), (max(stale, INSTANCE_ROWS_KEPT_S),))
            return released

        return await self._write(fn)

    async def release_instance_reservations(self, instance: str) -> int:
        return await self._write(lambda tx: m.release_where(tx, "instance = ?", (instance,)))

    async def open_reservations(self, instance: str | None = None) -> list[Reservation]:
        sql = f"SELECT {m.RES_COLUMNS} FROM reservations WHERE request_id NOT LIKE ?"
        args: tuple[str, ...] = (LEASE_PREFIX + "%",)
        if instance is not None:
            sql, args = sql + " AND instance = ?", (*args, instance)
        return [_reservation(r) for r in await self._fetch(sql + " ORDER BY created_at", args)]

    async def lease_holds(self, user_ids: Sequence[int]) -> dict[int, int]:
        held: dict[int, int] = {}
        for part in m.chunks(sorted(set(user_ids))):
            for row in await self._fetch(
                    "SELECT user_id, CAST(SUM(amount_nano) AS BIGINT) AS held FROM reservations "
                    f"WHERE request_id LIKE ? AND user_id IN {m.in_list(len(part))} GROUP BY user_id",
                    (LEASE_PREFIX + "%", *part)):
                held[int(row["user_id"])] = int(row["held"])
        return held

    async def audit(self) -> list[AuditProblem]:
        async with self._snapshot() as tx:
            return await audit_in_tx(tx)

    async def uncharged_entries(self, limit: int = 1000) -> list[UnchargedEntry]:
        rows = await self._fetch(
            "SELECT ts, request_id, user_id, key_id, uncharged_nano FROM ledger WHERE kind = 'uncharged' "
            "ORDER BY id DESC LIMIT ?", (limit,))
        return [UnchargedEntry(ts=r["ts"], request_id=r["request_id"], user_id=r["user_id"],
                               key_id=r["key_id"], uncharged_nano=r["uncharged_nano"]) for r in rows]

    # --- request log and usage ------------------------------------------------------------------
    async def write_logs(self, logs: Sequence[RequestLog]) -> None:
        if logs:
            await self._write(lambda tx: insert_logs(tx, logs))

    async def log_page(self, user_id: int, page: int, page_size: int) -> LogPage:
        page, page_size = max(page, 1), max(page_size, 1)
        async with self._snapshot() as tx:
            total = (await tx.fetchall("SELECT COUNT(*) AS n FROM request_logs WHERE user_id = ?",
                                       (user_id,)))[0]["n"]
            rows = await tx.fetchall(
                f"SELECT {', '.join(LOG_FIELDS)} FROM request_logs WHERE user_id = ? "
                "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (user_id, page_size, (page - 1) * page_size))
        return LogPage(items=[log_from_row(r) for r in rows], total=total)

    async def daily_costs(self, key_id: int, start_ts: int, end_ts: int) -> list[DailyCost]:
        day = self.dialect.day.replace("{col}", "created_at")
        rows = await self._fetch(
            f"SELECT {day} AS day, model, CAST(SUM(charge_nano) AS BIGINT) AS cost FROM request_logs "
            "WHERE key_id = ? AND created_at >= ? AND created_at < ? GROUP BY 1, 2 ORDER BY 1, 2",
            (key_id, float(start_ts), float(end_ts)))
        return [DailyCost(day=r["day"], model=r["model"], cost_nano=r["cost"]) for r in rows]

    async def claim_first_start(self) -> bool:
        # The primary key makes this one-winner even for concurrent transactions on PostgreSQL.
        return bool(await self._write(lambda tx: tx.execute(
            "INSERT INTO meta (name, value) SELECT 'first_start', 1 "
            "WHERE NOT EXISTS (SELECT 1 FROM users) ON CONFLICT (name) DO NOTHING")))

    # --- change notification --------------------------------------------------------------------
    async def auth_version(self) -> int:
        return int((await self._fetch_one(AUTH_VERSION_SQL))["value"])

    async def bump_auth_version(self) -> int:
        return await self._write(self._bump)

    @staticmethod
    async def _bump(tx: Tx) -> int:
        rows = await tx.fetchall(
            "UPDATE meta SET value = value + 1 WHERE name = 'auth_version' RETURNING value")
        return int(rows[0]["value"])
