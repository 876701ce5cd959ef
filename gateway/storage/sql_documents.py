"""Documents in SQL, for both backends: ``put_document``, ``get_document``, ``delete_document``.

A mixin of ``SqlStorage`` (as ``sql_money`` holds the money transactions): it uses only the
backend's ``_write`` and ``_fetch_one``. A put is one committed transaction before it returns, so a
document is durable (and visible to every replica on PostgreSQL) as soon as the await ends.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gateway.storage.rows import Document, DocumentExists

if TYPE_CHECKING:
    from gateway.storage.sql_money import Tx

T = TypeVar("T")


class SqlDocuments:
    if TYPE_CHECKING:  # supplied by SqlStorage and its backends

        async def _write(self, fn: Callable[[Tx], Awaitable[T]]) -> T: ...

        async def _fetch_one(self, sql: str, args: Sequence[Any] = ()) -> Any: ...

    async def put_document(self, doc: Document) -> Document:
        created = doc.created_at or time.time()

        async def fn(tx: Tx) -> int:
            return await tx.execute(
                "INSERT INTO documents (kind, id, user_id, body, created_at, deleted) "
                "VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (kind, id) DO NOTHING",
                (doc.kind, doc.id, doc.user_id, doc.body, created, False),
            )

        if not await self._write(fn):
            raise DocumentExists(f"{doc.kind} {doc.id} exists")
        return Document(kind=doc.kind, id=doc.id, user_id=doc.user_id, body=doc.body, created_at=created)

    async def get_document(self, kind: str, doc_id: str) -> Document | None:
        row = await self._fetch_one(
            "SELECT kind, id, user_id, body, created_at FROM documents "
            "WHERE kind = ? AND id = ? AND NOT deleted",
            (kind, doc_id),
        )
        if row is None:
            return None
        return Document(
            kind=row["kind"],
            id=row["id"],
            user_id=row["user_id"],
            body=row["body"],
            created_at=row["created_at"],
        )

    async def delete_document(self, kind: str, doc_id: str, user_id: int) -> bool:
        return bool(
            await self._write(
                lambda tx: tx.execute(
                    "UPDATE documents SET deleted = ?, body = '' "
                    "WHERE kind = ? AND id = ? AND user_id = ? AND NOT deleted",
                    (True, kind, doc_id, user_id),
                )
            )
        )
