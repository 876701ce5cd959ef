"""Idempotency keys in SQL, for both backends (CONTRACT 4c): ``claim_idempotency``,
``finish_idempotency``, ``release_idempotency``, ``idempotency_entry``.

A mixin of ``SqlStorage`` (like ``sql_documents``). The table's primary key ``(scope, idem_key)``
is what makes concurrent duplicates apply once: of several requests inserting the same key at the
same moment, one insert succeeds and the others see its row (PostgreSQL makes a conflicting insert
wait for the first one's commit; SQLite writes one transaction at a time).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.storage.rows import IdempotencyEntry

if TYPE_CHECKING:
    from gateway.storage.sql_money import Tx

T = TypeVar("T")

_ENTRY = "SELECT request_hash, status, answer, {now} - created_at AS age_s FROM idempotency_keys " \
         "WHERE scope = ? AND idem_key = ?"


def _entry(row: Any) -> IdempotencyEntry:
    return IdempotencyEntry(request_hash=row["request_hash"], status=row["status"], answer=row["answer"],
                            age_s=float(row["age_s"]))


class SqlIdempotency:
    if TYPE_CHECKING:  # supplied by SqlStorage and its backends

        async def _write(self, fn: Callable[[Tx], Awaitable[T]]) -> T: ...

        async def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any: ...

        def _sql(self, sql: str) -> str: ...

    async def claim_idempotency(self, scope: str, key: str, request_hash: str,
                                keep_s: float) -> IdempotencyEntry | None:
        """None when this caller now holds ``key`` (its request is to be served, then finished or
        released); else what the key already holds. Entries older than ``keep_s`` are forgotten
        first (all of them: the table stays as small as a day of mutations)."""
        prune = self._sql("DELETE FROM idempotency_keys WHERE created_at < {now} - ?")
        insert = self._sql("INSERT INTO idempotency_keys (scope, idem_key, request_hash, status, answer, "
                           "created_at) VALUES (?, ?, ?, NULL, NULL, {now}) "
                           "ON CONFLICT (scope, idem_key) DO NOTHING")
        existing = self._sql(_ENTRY)

        async def fn(tx: Tx) -> IdempotencyEntry | None:
            await tx.execute(prune, (keep_s,))
            if await tx.execute(insert, (scope, key, request_hash)):
                return None
            rows = await tx.fetchall(existing, (scope, key))
            return _entry(rows[0])

        return await self._write(fn)

    async def idempotency_entry(self, scope: str, key: str) -> IdempotencyEntry | None:
        row = await self._fetch_one(self._sql(_ENTRY), (scope, key))
        return None if row is None else _entry(row)

    async def finish_idempotency(self, scope: str, key: str, status: int, answer: str) -> None:
        """Keep the answer of the request that claimed ``key``, for its repeats."""
        await self._write(lambda tx: tx.execute(
            "UPDATE idempotency_keys SET status = ?, answer = ? "
            "WHERE scope = ? AND idem_key = ? AND status IS NULL", (status, answer, scope, key)))

    async def release_idempotency(self, scope: str, key: str) -> None:
        """Forget a claim whose request changed nothing (it was refused): the key may be used again."""
        await self._write(lambda tx: tx.execute(
            "DELETE FROM idempotency_keys WHERE scope = ? AND idem_key = ? AND status IS NULL",
            (scope, key)))
