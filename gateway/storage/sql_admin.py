"""User administration and the log queries of the admin API and the console, in SQL for both
backends (``?`` placeholders, like ``sql_common``; migration 0004 adds the columns).

A deleted user keeps its row, so that its ledger rows and request logs still add up in the audit;
``deleted_at`` hides it from every user lookup of ``sql_common`` (its keys and token then match
nobody), and frees its name for a new user. Every change that caches must see bumps the auth
version in the same transaction.
"""

from __future__ import annotations

import time

import msgspec

from gateway.accounts.records import UserRecord
from gateway.storage.rows import (
    NameTaken,
    SoftLimitCrossing,
    TaskRecord,
    UserChanges,
)
from gateway.storage.sql_common import _LIVE, _USER_COLUMNS, Tx, _user
from gateway.storage.sql_tasks import TASK_COLUMNS, task_from_row
from gateway.storage.sql_usage import SqlUsage

_ADJUST_LEDGER = """INSERT INTO ledger
(ts, kind, request_id, user_id, key_id, delta_nano, charge_nano, amount_nano, note)
VALUES (?, 'adjust', ?, ?, NULL, ?, 0, 0, ?)"""
_USER_FIELDS = {"name": "name", "group": "user_group", "enabled": "enabled",
                "soft_limit_nano": "soft_limit_nano", "budget_nano": "budget_nano",
                "budget_period": "budget_period"}  # Struct field -> column
_NAME_IN_USE = f"SELECT 1 AS one FROM users WHERE name = ? AND id <> ? AND {_LIVE}"


class SqlAdmin(SqlUsage):
    """``SqlUsage`` plus the user-administration methods of ``Storage``."""

    async def update_user(self, user_id: int, changes: UserChanges) -> UserRecord | None:
        sets = {_USER_FIELDS[f]: v for f, v in msgspec.structs.asdict(changes).items()
                if v is not msgspec.UNSET}

        async def fn(tx: Tx) -> UserRecord | None:
            if "name" in sets and await tx.fetchall(_NAME_IN_USE, (sets["name"], user_id)):
                raise NameTaken(sets["name"])
            if not sets:
                rows = await tx.fetchall(f"SELECT {_USER_COLUMNS} FROM users WHERE id = ? AND {_LIVE}",
                                         (user_id,))
            else:
                rows = await tx.fetchall(
                    f"UPDATE users SET {', '.join(f'{c} = ?' for c in sets)} WHERE id = ? AND {_LIVE} "
                    f"RETURNING {_USER_COLUMNS}", (*sets.values(), user_id))
                if rows:
                    await self._bump(tx)
            return _user(rows[0]) if rows else None

        try:
            return await self._write(fn)
        except NameTaken:
            raise
        except Exception:
            # A concurrent rename (PostgreSQL) can slip past the check; the unique index then
            # refuses it, and that is a taken name too.
            if "name" in sets and await self.user_name_taken(sets["name"], user_id):
                raise NameTaken(sets["name"]) from None
            raise

    async def claim_soft_limit_crossings(self, user_id: int, key_id: int) -> list[SoftLimitCrossing]:
        async def fn(tx: Tx) -> list[SoftLimitCrossing]:
            found = []
            for scope, table, spent, row_id in (("key", "api_keys", "spent_nano", key_id),
                                                ("user", "users", "used_nano", user_id)):
                rows = await tx.fetchall(
                    f"UPDATE {table} SET soft_alerted_nano = soft_limit_nano WHERE id = ? "
                    f"AND soft_limit_nano IS NOT NULL AND {spent} >= soft_limit_nano "
                    "AND (soft_alerted_nano IS NULL OR soft_alerted_nano <> soft_limit_nano) "
                    f"RETURNING soft_limit_nano, {spent} AS spent", (row_id,))
                found += [SoftLimitCrossing(scope=scope, user_id=user_id,
                                            key_id=key_id if scope == "key" else None,
                                            soft_limit_nano=r["soft_limit_nano"], spent_nano=r["spent"])
                          for r in rows]
            return found

        return await self._write(fn)

    async def delete_user(self, user_id: int) -> bool:
        async def fn(tx: Tx) -> bool:
            done = await tx.execute(f"UPDATE users SET deleted_at = ?, enabled = ? WHERE id = ? AND {_LIVE}",
                                    (int(time.time()), False, user_id))
            if done:
                await self._bump(tx)
            return bool(done)

        return await self._write(fn)

    async def user_name_taken(self, name: str, except_id: int | None = None) -> bool:
        return bool(await self._fetch(_NAME_IN_USE, (name, except_id or 0)))

    async def adjust_balance(self, user_id: int, amount_nano: int, reason: str,
                             request_id: str) -> UserRecord | None:
        async def fn(tx: Tx) -> UserRecord | None:
            rows = await tx.fetchall(
                "UPDATE users SET balance_nano = balance_nano + ? WHERE id = ? AND balance_nano + ? >= 0 "
                f"AND {_LIVE} RETURNING {_USER_COLUMNS}", (amount_nano, user_id, amount_nano))
            if not rows:
                return None
            await tx.execute(_ADJUST_LEDGER, (time.time(), request_id, user_id, amount_nano, reason))
            await self._bump(tx)
            return _user(rows[0])

        return await self._write(fn)

    async def user_tasks(self, user_id: int, page: int, page_size: int) -> tuple[list[TaskRecord], int]:
        page, page_size = max(page, 1), max(page_size, 1)
        async with self._snapshot() as tx:
            counted = await tx.fetchall("SELECT COUNT(*) AS n FROM tasks WHERE user_id = ?", (user_id,))
            rows = await tx.fetchall(
                f"SELECT {TASK_COLUMNS} FROM tasks WHERE user_id = ? ORDER BY created_at DESC, task_id "
                "LIMIT ? OFFSET ?", (user_id, page_size, (page - 1) * page_size))
        return [task_from_row(r) for r in rows], counted[0]["n"]
