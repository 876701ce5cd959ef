"""The response cache's table in SQL, for both backends (``plugins.cache``; migration 0015):
``cached_answer``, ``keep_answer``.

A mixin of ``SqlStorage`` (like ``sql_idempotency``). An entry is whatever text the cache keeps
under its key (it names its user and its age itself). A read is one primary-key lookup and writes
nothing: eviction is oldest-first by ``created_at``, not by last use, so a hit costs no write.
Each keep, in one transaction, drops what has expired, writes the entry and then evicts the oldest
entries while the table is over ``max_entries`` or ``max_bytes``, so the bound holds after every
commit, whichever replica wrote.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from gateway.storage.sql_money import Tx

T = TypeVar("T")

_UPSERT = ("INSERT INTO response_cache (cache_key, user_id, entry, size_bytes, created_at) "
           "VALUES (?, ?, ?, ?, ?) "
           "ON CONFLICT (cache_key) DO UPDATE SET user_id = excluded.user_id, entry = excluded.entry, "
           "size_bytes = excluded.size_bytes, created_at = excluded.created_at")
_TOTALS = "SELECT COUNT(*) AS n, COALESCE(SUM(size_bytes), 0) AS size FROM response_cache"
_OLDEST = "SELECT cache_key, size_bytes FROM response_cache ORDER BY created_at, cache_key LIMIT ?"
_EVICT_BATCH = 500  # oldest entries read at a time while over a bound


class SqlResponseCache:
    if TYPE_CHECKING:  # supplied by SqlStorage and its backends

        async def _write(self, fn: Callable[[Tx], Awaitable[T]]) -> T: ...

        async def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any: ...

    async def cached_answer(self, cache_key: str) -> str | None:
        row = await self._fetch_one("SELECT entry FROM response_cache WHERE cache_key = ?", (cache_key,))
        return None if row is None else str(row["entry"])

    async def keep_answer(self, cache_key: str, user_id: int, entry: str, created_at: float, *,
                          expired_before: float, max_entries: int, max_bytes: int) -> int:
        """Keep ``entry``; returns how many entries were evicted to stay within the bounds."""
        size = len(entry.encode())

        async def fn(tx: Tx) -> int:
            await tx.execute("DELETE FROM response_cache WHERE created_at < ?", (expired_before,))
            await tx.execute(_UPSERT, (cache_key, user_id, entry, size, created_at))
            totals = (await tx.fetchall(_TOTALS, ()))[0]
            count, total = int(totals["n"]), int(totals["size"])
            evicted: list[str] = []
            while count > max_entries or total > max_bytes:
                rows = await tx.fetchall(_OLDEST, (_EVICT_BATCH + len(evicted),))
                fresh = rows[len(evicted):]
                if not fresh:
                    break
                for row in fresh:
                    if count <= max_entries and total <= max_bytes:
                        break
                    evicted.append(row["cache_key"])
                    count, total = count - 1, total - int(row["size_bytes"])
            for start in range(0, len(evicted), _EVICT_BATCH):
                part = evicted[start:start + _EVICT_BATCH]
                marks = ", ".join("?" * len(part))
                await tx.execute(f"DELETE FROM response_cache WHERE cache_key IN ({marks})", part)
            return len(evicted)

        return await self._write(fn)
