"""SQLite's hot writes (the group commit of reservations, the batch of settlements) run on the event
loop, without the hop to the writer thread; when another process holds the write lock they wait
for it in the thread instead, never on the loop (gateway/storage/sqlite.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gateway.accounts.records import KeyRecord
from gateway.storage import open_storage
from gateway.storage.rows import Reservation, Settlement
from gateway.storage.sqlite import SqliteStorage


async def _principal(store: SqliteStorage, balance_nano: int) -> tuple[int, int]:
    """A user with ``balance_nano`` and one key: (user id, key id)."""
    user = await store.create_user("u", "default", balance_nano, "0" * 64, "r")
    key = await store.create_key(KeyRecord(id=0, user_id=user.id, name="k", key_hash="1" * 64,
                                           masked="sk-..."))
    return user.id, key.id


@pytest_asyncio.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStorage]:
    store = open_storage(f"sqlite:///{tmp_path}/gateway.db")
    assert isinstance(store, SqliteStorage)
    await store.open()
    yield store
    await store.close()


def _block_writer_thread(store: SqliteStorage) -> threading.Event:
    """Occupy the writer thread until the returned event is set."""
    release = threading.Event()
    assert store._thread is not None
    store._thread.submit(release.wait)
    return release


async def test_reserve_and_settle_do_not_need_the_writer_thread(sqlite_store: SqliteStorage) -> None:
    user_id, key_id = await _principal(sqlite_store, 1_000)
    release = _block_writer_thread(sqlite_store)
    try:
        r = Reservation("req-1", user_id, key_id, 300, "proc")
        assert await asyncio.wait_for(sqlite_store.reserve(r), 5)
        await asyncio.wait_for(sqlite_store.settle_many([Settlement(r, 120)]), 5)
    finally:
        release.set()
    user = await sqlite_store.get_user(user_id)
    key = await sqlite_store.get_key(key_id)
    assert user is not None and key is not None
    assert (user.balance_nano, user.used_nano, key.spent_nano, key.reserved_nano) == (880, 120, 120, 0)
    assert await sqlite_store.audit() == []


async def test_reservations_during_a_write_are_grouped_on_the_loop(sqlite_store: SqliteStorage) -> None:
    """Reservations that arrive while a write is under way join one group commit, which runs on
    the loop too, each evaluated on its own (the balance allows 7 of 10)."""
    user_id, key_id = await _principal(sqlite_store, 700)
    release = _block_writer_thread(sqlite_store)
    try:
        async with sqlite_store._write_lock:  # a write under way
            holds = [Reservation(f"g{i}", user_id, key_id, 100, "p") for i in range(10)]
            waiting = [asyncio.create_task(sqlite_store.reserve(r)) for r in holds]
            await asyncio.sleep(0.05)
            assert not any(task.done() for task in waiting)
        results = await asyncio.wait_for(asyncio.gather(*waiting), 5)
    finally:
        release.set()
    assert sum(results) == 7
    user = await sqlite_store.get_user(user_id)
    assert user is not None and user.balance_nano == 0
    assert await sqlite_store.audit() == []


async def test_a_lock_held_by_another_process_is_waited_for_off_the_loop(
        sqlite_store: SqliteStorage, tmp_path: Path) -> None:
    user_id, key_id = await _principal(sqlite_store, 1_000)
    other = sqlite3.connect(tmp_path / "gateway.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another gateway process in the middle of a write
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    try:
        held = Reservation("req-2", user_id, key_id, 400, "proc")
        reserve = asyncio.create_task(sqlite_store.reserve(held))
        await asyncio.sleep(0.3)
        assert not reserve.done()  # waiting for the lock...
        assert ticks >= 10  # ...in the writer thread: the loop went on
        other.execute("COMMIT")
        assert await asyncio.wait_for(reserve, 10)
    finally:
        ticking.cancel()
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()
    user = await sqlite_store.get_user(user_id)
    assert user is not None and user.balance_nano == 600
    assert await sqlite_store.audit() == []


async def test_synchronous_full_writes_through_the_thread(tmp_path: Path) -> None:
    """FULL fsyncs every commit: that must not happen on the event loop."""
    store = open_storage(f"sqlite:///{tmp_path}/full.db?synchronous=FULL")
    assert isinstance(store, SqliteStorage)
    await store.open()
    try:
        user_id, key_id = await _principal(store, 1_000)
        release = _block_writer_thread(store)
        reserve = asyncio.create_task(store.reserve(Reservation("req-3", user_id, key_id, 10, "proc")))
        await asyncio.sleep(0.2)
        assert not reserve.done()  # queued behind the blocked thread
        release.set()
        assert await asyncio.wait_for(reserve, 5)
    finally:
        await store.close()
