"""The task engine's storage, written once for both SQL backends and mixed into ``SqlStorage``.

* The records themselves: ``create_task``, ``get_task``, ``update_task_cas`` (a compare-and-swap
  on ``version``) and ``due_tasks``.

* ``claim_due_tasks``: the poller takes due tasks under a lease (``lease_owner``/``lease_until``,
  migration 0003): one replica polls a task at a time, and a lease that expires (its replica died)
  lets another take the task over. On PostgreSQL the claim skips rows another replica is claiming
  (``FOR UPDATE SKIP LOCKED``); SQLite serialises writers anyway.
* ``transition_task``: a compare-and-swap of the task (``version``) and, in the same transaction,
  the close of its money hold: the charge on success or the release on failure. Only the writer
  whose version matched moves money, and the hold's row is deleted by exactly one transaction
  (``sql_money.delete_reservations``), so a charge or refund happens once, whatever the number of
  pollers. Lock order: the task row, then the reservation, user and key rows (``sql_money``).
* The callback outbox (``task_callbacks``, migration 0005): a transition queues its callback in
  the same transaction, so it is queued once; senders claim due callbacks under a lease as the
  poller claims tasks, the oldest of each task first.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from gateway.storage import sql_money as m
from gateway.storage.rows import Settlement, TaskCallback, TaskRecord
from gateway.storage.sql_dialect import Dialect

T = TypeVar("T")
_FIELDS: tuple[str, ...] = TaskRecord.__struct_fields__
TASK_COLUMNS = ", ".join(_FIELDS)
_EDITABLE = frozenset(_FIELDS) - {"task_id", "version"}
_DUE = "next_poll_at IS NOT NULL AND next_poll_at <= ? AND (lease_until IS NULL OR lease_until < ?)"
_QUEUE_CALLBACK = ("INSERT INTO task_callbacks (task_id, url, body, attempts, next_at, created_at) "
                   "VALUES (?, ?, ?, 0, ?, ?)")
# Due, free, and the oldest still queued of its task (so one task's callbacks leave in order).
_CALLBACK_DUE = ("next_at <= ? AND (lease_until IS NULL OR lease_until < ?) AND NOT EXISTS ("
                 "SELECT 1 FROM task_callbacks p WHERE p.task_id = task_callbacks.task_id "
                 "AND p.id < task_callbacks.id)")
_CALLBACK_COLUMNS = "id, task_id, url, body, attempts"


def task_from_row(row: m.Row) -> TaskRecord:
    return TaskRecord(**{f: row[f] for f in _FIELDS})


class SqlTaskStore:
    """Mixin: needs the backend's ``_write``/``_fetch`` and ``dialect`` (see ``SqlStorage``)."""

    if TYPE_CHECKING:
        dialect: Dialect

        async def _write(self, fn: Callable[[m.Tx], Awaitable[T]]) -> T: ...

        async def _fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]: ...

        async def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any: ...


    async def create_task(self, task: TaskRecord) -> TaskRecord:
        now = time.time()
        task = msgspec.structs.replace(task, version=0, created_at=task.created_at or now,
                                       updated_at=task.updated_at or task.created_at or now)
        values = msgspec.structs.astuple(task)
        await self._write(lambda tx: tx.execute(
            f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ({', '.join('?' * len(values))})", values))
        return task

    async def get_task(self, task_id: str) -> TaskRecord | None:
        row = await self._fetch_one(f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,))
        return task_from_row(row) if row else None

    async def update_task_cas(self, task_id: str, expected_version: int,
                              changes: Mapping[str, Any]) -> TaskRecord | None:
        unknown = set(changes) - _EDITABLE
        if unknown:
            raise ValueError(f"not editable task fields: {sorted(unknown)}")
        sets = {"updated_at": time.time(), **changes}
        rows = await self._write(lambda tx: tx.fetchall(
            f"UPDATE tasks SET {', '.join(f'{f} = ?' for f in sets)}, version = version + 1 "
            f"WHERE task_id = ? AND version = ? RETURNING {TASK_COLUMNS}",
            (*sets.values(), task_id, expected_version)))
        return task_from_row(rows[0]) if rows else None

    async def due_tasks(self, now: float, limit: int) -> list[TaskRecord]:
        rows = await self._fetch(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE next_poll_at IS NOT NULL AND next_poll_at <= ? "
            "ORDER BY next_poll_at LIMIT ?", (float(now), limit))
        return [task_from_row(r) for r in rows]

    async def claim_due_tasks(self, now: float, limit: int, owner: str, lease_s: float) -> list[TaskRecord]:
        """Up to ``limit`` due tasks whose lease is free or expired, now leased to ``owner`` until
        ``now + lease_s``; oldest due first. The lease does not change ``version``."""
        # A read first: an idle poller asks every tick, and a write transaction (on SQLite, the
        # one writer lock the money path also needs) is only worth it when something is due.
        if not await self._fetch(f"SELECT task_id FROM tasks WHERE {_DUE} LIMIT 1", (now, now)):
            return []
        skip = " FOR UPDATE SKIP LOCKED" if self.dialect.name == "postgresql" else ""
        sql = (f"UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE task_id IN ("
               f"SELECT task_id FROM tasks WHERE {_DUE} ORDER BY next_poll_at LIMIT ?{skip}) "
               f"AND {_DUE} RETURNING {TASK_COLUMNS}")
        args = (owner, now + lease_s, now, now, limit, now, now)
        rows = await self._write(lambda tx: tx.fetchall(sql, args))
        tasks = [task_from_row(r) for r in rows]
        tasks.sort(key=lambda t: t.next_poll_at or 0.0)
        return tasks

    async def release_task_leases(self, owner: str) -> int:
        """Give up every lease of ``owner`` (a replica stopping), so others need not wait."""
        return await self._write(lambda tx: tx.execute(
            "UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?", (owner,)))

    async def transition_task(self, task_id: str, expected_version: int, changes: Mapping[str, Any],
                              settlement: Settlement | None = None,
                              callback: tuple[str, str] | None = None) -> TaskRecord | None:
        """Apply ``changes`` only if the stored version is ``expected_version`` (bumping it, and
        freeing the lease) and, in the same transaction, close the hold of ``settlement`` (its
        ``charge_nano`` charged, the rest released; a hold already closed is left alone) and queue
        ``callback`` (url, JSON body). None, and nothing changed, when another writer got there
        first."""
        unknown = set(changes) - _EDITABLE
        if unknown:
            raise ValueError(f"not editable task fields: {sorted(unknown)}")
        sets = dict(changes)
        sets.setdefault("updated_at", time.time())
        sql = (f"UPDATE tasks SET {', '.join(f'{f} = ?' for f in sets)}, version = version + 1, "
               f"lease_owner = NULL, lease_until = NULL WHERE task_id = ? AND version = ? "
               f"RETURNING {TASK_COLUMNS}")
        args = (*sets.values(), task_id, expected_version)

        async def fn(tx: m.Tx) -> TaskRecord | None:
            rows = await tx.fetchall(sql, args)
            if not rows:
                return None
            if settlement is not None:
                closed = [(row, min(max(settlement.charge_nano, 0), row["amount_nano"]), settlement.log)
                          for row in await m.delete_reservations(tx, [settlement.reservation.request_id])]
                await m.book_closures(tx, closed, count_requests=True, release_kind="release")
            if callback is not None:
                now = time.time()
                await tx.execute(_QUEUE_CALLBACK, (task_id, callback[0], callback[1], now, now))
            return task_from_row(rows[0])

        return await self._write(fn)

    async def claim_task_callbacks(self, now: float, limit: int, owner: str,
                                   lease_s: float) -> list[TaskCallback]:
        """Due callbacks (each the oldest still queued of its task) leased to ``owner``."""
        if not await self._fetch(f"SELECT id FROM task_callbacks WHERE {_CALLBACK_DUE} LIMIT 1", (now, now)):
            return []
        skip = " FOR UPDATE SKIP LOCKED" if self.dialect.name == "postgresql" else ""
        sql = (f"UPDATE task_callbacks SET lease_owner = ?, lease_until = ? WHERE id IN ("
               f"SELECT id FROM task_callbacks WHERE {_CALLBACK_DUE} ORDER BY id LIMIT ?{skip}) "
               f"AND (lease_until IS NULL OR lease_until < ?) RETURNING {_CALLBACK_COLUMNS}")
        rows = await self._write(lambda tx: tx.fetchall(sql, (owner, now + lease_s, now, now, limit, now)))
        found = [TaskCallback(id=r["id"], task_id=r["task_id"], url=r["url"], body=r["body"],
                              attempts=r["attempts"]) for r in rows]
        return sorted(found, key=lambda c: c.id)

    async def finish_task_callback(self, callback_id: int) -> None:
        await self._write(lambda tx: tx.execute("DELETE FROM task_callbacks WHERE id = ?", (callback_id,)))

    async def retry_task_callback(self, callback_id: int, attempts: int, next_at: float) -> None:
        await self._write(lambda tx: tx.execute(
            "UPDATE task_callbacks SET attempts = ?, next_at = ?, lease_owner = NULL, lease_until = NULL "
            "WHERE id = ?", (attempts, next_at, callback_id)))

    async def release_callback_leases(self, owner: str) -> int:
        return await self._write(lambda tx: tx.execute(
            "UPDATE task_callbacks SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = ?",
            (owner,)))

    async def tasks_by_ids(self, task_ids: Sequence[str]) -> list[TaskRecord]:
        """The stored tasks among ``task_ids`` (unknown ids left out), in no particular order."""
        found: list[TaskRecord] = []
        ids = list(dict.fromkeys(task_ids))
        for part in m.chunks(ids):
            rows = await self._fetch(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE task_id IN {m.in_list(len(part))}", part)
            found += [task_from_row(r) for r in rows]
        return found

    async def family_tasks(self, user_id: int, family: str, limit: int, *, after: TaskRecord | None = None,
                           newest_first: bool = True) -> list[TaskRecord]:
        # Keyset paging on (created_at, task_id): a page never repeats or skips a task that was
        # created meanwhile (the index tasks_user_time serves the user's range).
        direction, past = ("DESC", "<") if newest_first else ("ASC", ">")
        where, args = "user_id = ? AND family = ?", [user_id, family]
        if after is not None:
            where += f" AND (created_at {past} ? OR (created_at = ? AND task_id {past} ?))"
            args += [after.created_at, after.created_at, after.task_id]
        rows = await self._fetch(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE {where} "
            f"ORDER BY created_at {direction}, task_id {direction} LIMIT ?", [*args, max(limit, 0)])
        return [task_from_row(r) for r in rows]

    async def delete_task(self, task_id: str) -> bool:
        """Remove a task that was never changed after its creation: one whose hold was refused at
        submit (so it never held money and its id was never handed out)."""
        return bool(await self._write(lambda tx: tx.execute(
            "DELETE FROM tasks WHERE task_id = ? AND version = 0", (task_id,))))

