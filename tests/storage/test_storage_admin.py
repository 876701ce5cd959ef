"""User administration and log queries of the storage (``sql_admin``), on both backends."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.migrations import load_migrations
from gateway.storage.rows import LogFilter, NameTaken, TaskRecord, UserChanges
from gateway.storage.sql_common import SQLITE
from gateway.storage.testing import NewPrincipal, sample_log


async def test_update_user_and_unique_names(storage: Storage) -> None:
    a = await storage.create_user("ann", "default", 100, "hash-ann", "r1")
    b = await storage.create_user("bob", "default", 100, "hash-bob", "r2")
    assert a.enabled and await storage.user_name_taken("ann") and not await storage.user_name_taken("cid")
    assert not await storage.user_name_taken("ann", except_id=a.id)
    with pytest.raises(NameTaken):
        await storage.update_user(b.id, UserChanges(name="ann"))
    with pytest.raises(Exception):  # noqa: B017 - the database itself refuses a duplicate live name
        await storage.create_user("ann", "default", 0, "hash-ann-2", "r3")
    changed = await storage.update_user(b.id, UserChanges(name="bea", group="vip", enabled=False))
    assert changed is not None and (changed.name, changed.group, changed.enabled) == ("bea", "vip", False)
    fresh = await storage.get_user(b.id)
    assert fresh is not None and fresh.enabled is False and fresh.name == "bea"
    same = await storage.update_user(b.id, UserChanges())
    assert same == fresh
    assert await storage.update_user(999, UserChanges(name="x")) is None
    before = await storage.auth_version()
    await storage.update_user(b.id, UserChanges(enabled=True))
    assert await storage.auth_version() > before  # caches must see it


async def test_delete_user_hides_it_and_keeps_history(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(1_000)
    await storage.write_logs([sample_log(p, "req-kept")])
    assert await storage.delete_user(p.user.id)
    assert not await storage.delete_user(p.user.id)
    assert await storage.get_user(p.user.id) is None
    assert p.user.id not in [u.id for u in await storage.list_users()]
    assert await storage.topup(p.user.id, 5, "t") is None
    assert await storage.adjust_balance(p.user.id, 5, "why", "t") is None
    assert await storage.update_user(p.user.id, UserChanges(name="again")) is None
    kept = await storage.query_logs(LogFilter(user_id=p.user.id), 1, 10)
    assert [log.request_id for log in kept.items] == ["req-kept"]
    assert await storage.audit() == []
    # The name is free again for a new user.
    again = await storage.create_user(p.user.name, "default", 0, "hash-new", "r")
    assert again.id != p.user.id


async def test_adjust_balance(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(1_000)
    up = await storage.adjust_balance(p.user.id, 500, "goodwill", "adj-1")
    assert up is not None and up.balance_nano == 1_500
    assert await storage.adjust_balance(p.user.id, -1_501, "too much", "adj-2") is None
    down = await storage.adjust_balance(p.user.id, -1_500, "all of it", "adj-3")
    assert down is not None and down.balance_nano == 0
    assert await storage.audit() == []


async def test_query_logs_filters(storage: Storage, new_principal: NewPrincipal) -> None:
    p, q = await new_principal(1_000), await new_principal(1_000)
    now = time.time()
    await storage.write_logs([
        sample_log(p, "a1", created_at=now - 100, model="m1"),
        sample_log(p, "a2", created_at=now - 50, model="m2", status=502, outcome="upstream_error"),
        sample_log(q, "b1", created_at=now - 10, model="m1"),
    ])

    async def ids(where: LogFilter, page: int = 1, size: int = 10) -> tuple[list[str], int]:
        found = await storage.query_logs(where, page, size)
        return [log.request_id for log in found.items], found.total

    assert await ids(LogFilter()) == (["b1", "a2", "a1"], 3)
    assert await ids(LogFilter(user_id=p.user.id)) == (["a2", "a1"], 2)
    assert await ids(LogFilter(key_id=q.key.id)) == (["b1"], 1)
    assert await ids(LogFilter(model="m1")) == (["b1", "a1"], 2)
    assert await ids(LogFilter(status=502)) == (["a2"], 1)
    assert await ids(LogFilter(request_id="a1")) == (["a1"], 1)
    assert await ids(LogFilter(since=now - 60)) == (["b1", "a2"], 2)
    assert await ids(LogFilter(until=now - 50)) == (["a1"], 1)
    assert await ids(LogFilter(), page=2, size=2) == (["a1"], 3)
    assert await ids(LogFilter(model="nope")) == ([], 0)


async def test_user_daily_costs_and_tasks(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(1_000)
    day = 86_400 * 20_000  # a UTC midnight
    await storage.write_logs([sample_log(p, "c1", created_at=day + 10, charge_nano=5),
                              sample_log(p, "c2", created_at=day + 20, charge_nano=7, model="m2"),
                              sample_log(p, "c3", created_at=day + 86_400 + 5, charge_nano=1)])
    costs = await storage.user_daily_costs(p.user.id, day, day + 2 * 86_400)
    assert [(c.day, c.model, c.cost_nano) for c in costs] == [
        ("2024-10-04", "m2", 7), ("2024-10-04", "sim-chat", 5), ("2024-10-05", "sim-chat", 1)]
    assert await storage.user_daily_costs(p.user.id + 1000, day, day + 2 * 86_400) == []

    for n in range(3):
        await storage.create_task(TaskRecord(task_id=f"t{n}", user_id=p.user.id, key_id=p.key.id,
                                             family="imagetask", status="SUBMITTED", created_at=100.0 + n))
    tasks, total = await storage.user_tasks(p.user.id, 1, 2)
    assert total == 3 and [t.task_id for t in tasks] == ["t2", "t1"]
    tasks, total = await storage.user_tasks(p.user.id, 2, 2)
    assert [t.task_id for t in tasks] == ["t0"]
    assert await storage.user_tasks(p.user.id + 1000, 1, 10) == ([], 0)


async def test_migration_makes_old_duplicate_names_unique(tmp_path: Path) -> None:
    """A database from before names were unique: every duplicate but the oldest gets its id."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                     "applied_at DOUBLE PRECISION NOT NULL)")
        for migration in load_migrations():
            if migration.version < 4:
                for statement in migration.statements(SQLITE.pk):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)",
                             (migration.version, migration.name))
        for token in ("h1", "h2", "h3"):
            conn.execute("INSERT INTO users (name, user_group, token_hash, created_at) "
                         "VALUES ('dup', 'default', ?, 0)", (token,))
    storage = open_storage(f"sqlite:///{path}")
    await storage.open()
    try:
        users = await storage.list_users()
        assert [(u.name, u.enabled) for u in users] == [("dup", True), ("dup#2", True), ("dup#3", True)]
    finally:
        await storage.close()
