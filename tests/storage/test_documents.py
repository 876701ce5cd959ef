"""Documents (``Storage.put_document`` / ``get_document`` / ``delete_document``) on both backends."""

from __future__ import annotations

import pytest

from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.rows import Document, DocumentExists


async def test_put_get_delete(storage: Storage) -> None:
    stored = await storage.put_document(Document(kind="note", id="n1", user_id=7, body='{"a": 1}'))
    assert stored.created_at > 0
    got = await storage.get_document("note", "n1")
    assert got is not None and got.user_id == 7 and got.body == '{"a": 1}'
    assert await storage.get_document("other", "n1") is None  # kinds are namespaces
    assert await storage.get_document("note", "missing") is None
    assert not await storage.delete_document("note", "n1", user_id=8)  # not the owner
    assert await storage.get_document("note", "n1") is not None
    assert await storage.delete_document("note", "n1", user_id=7)
    assert await storage.get_document("note", "n1") is None
    assert not await storage.delete_document("note", "n1", user_id=7)  # once only


async def test_ids_are_never_reused(storage: Storage) -> None:
    await storage.put_document(Document(kind="note", id="n2", user_id=1, body="{}"))
    with pytest.raises(DocumentExists):
        await storage.put_document(Document(kind="note", id="n2", user_id=2, body="{}"))
    await storage.delete_document("note", "n2", user_id=1)
    with pytest.raises(DocumentExists):  # a tombstone keeps the id
        await storage.put_document(Document(kind="note", id="n2", user_id=1, body="{}"))


async def test_survives_reopen(database_url: str) -> None:
    first = open_storage(database_url)
    await first.open()
    await first.put_document(Document(kind="note", id="n3", user_id=1, body='"kept"'))
    await first.close()
    second = open_storage(database_url)
    await second.open()
    try:
        got = await second.get_document("note", "n3")
        assert got is not None and got.body == '"kept"'
    finally:
        await second.close()
