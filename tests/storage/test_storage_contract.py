"""The storage contract, run on both backends."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from gateway.accounts.records import RequestLog
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.migrations import load_migrations
from gateway.storage.rows import KeyChanges, Reservation, Settlement, TaskRecord
from gateway.storage.testing import NewPrincipal, sample_log


def reservation(p, request_id: str, amount: int, instance: str = "i-test") -> Reservation:
    return Reservation(request_id=request_id, user_id=p.user.id, key_id=p.key.id, amount_nano=amount,
                       instance=instance)


def request_log(p, request_id: str, *, model: str = "sim-chat",
                created_at: float | None = None) -> RequestLog:
    return sample_log(p, request_id, model=model, created_at=created_at or time.time())


# --- schema ------------------------------------------------------------------------------------------
async def test_migrations_recorded_and_not_reapplied(storage: Storage, database_url: str) -> None:
    latest = load_migrations()[-1].version
    assert await storage.schema_version() == latest
    again = open_storage(database_url)
    await again.open()  # applying nothing twice; tables already exist
    assert await again.schema_version() == latest
    await again.close()


def test_open_storage_urls(tmp_path) -> None:
    s = open_storage(f"sqlite:///{tmp_path}/x.db?synchronous=FULL")
    assert type(s).__name__ == "SqliteStorage"
    assert type(open_storage("postgresql://u@h/db")).__name__ == "PostgresStorage"
    with pytest.raises(ValueError, match="unsupported"):
        open_storage("mysql://u@h/db")
    with pytest.raises(ValueError, match="unknown sqlite"):
        open_storage("sqlite:///x.db?journal=1")


# --- users and keys ----------------------------------------------------------------------------------
async def test_users(storage: Storage) -> None:
    assert await storage.count_users() == 0
    assert await storage.claim_first_start() is True
    assert await storage.claim_first_start() is False  # once ever
    user = await storage.create_user("alice", "vip", 5_000, "hash-a", "req-1")
    assert (user.name, user.group, user.balance_nano, user.used_nano) == ("alice", "vip", 5_000, 0)
    assert await storage.get_user(user.id) == user
    assert await storage.user_by_token_hash("hash-a") == user
    assert await storage.user_by_token_hash("nope") is None
    assert await storage.get_user(999_999) is None
    topped = await storage.topup(user.id, 1_000, "req-2")
    assert topped is not None and topped.balance_nano == 6_000
    assert await storage.topup(user.id, -7_000, "req-3") is None  # never below zero
    assert await storage.topup(999_999, 1, "req-4") is None
    assert [u.id for u in await storage.list_users()] == [user.id]
    assert await storage.count_users() == 1
    assert await storage.audit() == []


async def test_keys_and_auth_version(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(quota_nano=500)
    key = p.key
    assert (key.quota_nano, key.spent_nano, key.reserved_nano, key.enabled) == (500, 0, 0, True)
    assert await storage.key_by_hash(key.key_hash) == key
    assert await storage.get_key(key.id) == key
    before = await storage.auth_version()
    changed = await storage.update_key(key.id, KeyChanges(models=["a", "b"], allow_ips=["10.0.0.0/8"],
                                                          expires_at=123, enabled=False, name="renamed"))
    assert changed is not None
    assert (changed.models, changed.allow_ips, changed.expires_at, changed.enabled, changed.name) == (
        ["a", "b"], ["10.0.0.0/8"], 123, False, "renamed")
    assert changed.quota_nano == 500  # UNSET leaves it
    cleared = await storage.update_key(key.id, KeyChanges(quota_nano=None, models=None))
    assert cleared is not None and cleared.quota_nano is None and cleared.models is None
    assert await storage.update_key(999_999, KeyChanges(name="x")) is None
    assert await storage.auth_version() > before
    assert [k.id for k in await storage.list_keys(p.user.id)] == [key.id]
    assert await storage.delete_key(key.id) is True
    assert await storage.delete_key(key.id) is False
    assert await storage.key_by_hash(key.key_hash) is None
    assert await storage.list_keys() == []
    bumped = await storage.bump_auth_version()
    assert bumped == await storage.auth_version()


# --- money -------------------------------------------------------------------------------------------
async def test_reserve_checks_balance_and_key_ceiling(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(balance_nano=1_000, quota_nano=600)
    assert await storage.reserve(reservation(p, "r1", 500))
    assert not await storage.reserve(reservation(p, "r2", 200))  # key: 500 + 200 > 600
    assert await storage.reserve(reservation(p, "r3", 100))
    assert await storage.reserve(reservation(p, "r0", 0))  # free models still recorded
    key = await storage.get_key(p.key.id)
    user = await storage.get_user(p.user.id)
    assert key is not None and user is not None
    assert (key.reserved_nano, user.balance_nano) == (600, 400)
    assert {r.request_id for r in await storage.open_reservations()} == {"r0", "r1", "r3"}
    q = await new_principal(balance_nano=100)  # no key ceiling: the balance decides
    assert not await storage.reserve(reservation(q, "r4", 101))
    assert await storage.reserve(reservation(q, "r5", 100))
    off = await new_principal(balance_nano=100, enabled=False)
    assert not await storage.reserve(reservation(off, "r6", 1))
    assert await storage.audit() == []


async def test_settle_charges_excess_within_limits_and_happens_once(storage: Storage,
                                                                   new_principal: NewPrincipal) -> None:
    """A charge above the hold takes what the key's ceiling allows (800 here); the rest is
    recorded as uncharged, on the log row and in the ledger, never dropped."""
    p = await new_principal(balance_nano=1_000, quota_nano=800)
    r = reservation(p, "req", 300)
    assert await storage.reserve(r)
    log = request_log(p, "req")
    await storage.settle_many([Settlement(r, 900, log)])  # 300 held + 500 taken, 100 beyond the key
    await storage.settle_many([Settlement(r, 100, request_log(p, "req"))])  # already closed: nothing
    user, key = await storage.get_user(p.user.id), await storage.get_key(p.key.id)
    assert user is not None and key is not None
    assert (user.balance_nano, user.used_nano, user.request_count) == (200, 800, 1)
    assert (key.spent_nano, key.reserved_nano) == (800, 0)
    page = await storage.log_page(p.user.id, 1, 10)
    assert page.total == 1
    assert page.items[0] == msgspec.structs.replace(log, charge_nano=800, uncharged_nano=100)
    assert [(e.request_id, e.uncharged_nano) for e in await storage.uncharged_entries()] == [("req", 100)]
    assert await storage.audit() == []


async def test_release_returns_everything(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(balance_nano=1_000, quota_nano=1_000)
    a, b = reservation(p, "a", 400), reservation(p, "b", 250)
    assert await storage.reserve(a) and await storage.reserve(b)
    # a batch: one charged, one released, a duplicate of the first (ignored) and a plain log
    await storage.settle_many([Settlement(a, 100), Settlement(b, 0), Settlement(a, 400)],
                              [request_log(p, "rejected")])
    user, key = await storage.get_user(p.user.id), await storage.get_key(p.key.id)
    assert user is not None and key is not None
    assert (user.balance_nano, user.used_nano) == (900, 100)
    assert (key.spent_nano, key.reserved_nano) == (100, 0)
    assert await storage.open_reservations() == []
    assert (await storage.log_page(p.user.id, 1, 10)).total == 1
    assert await storage.audit() == []


async def test_orphaned_reservations_released(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(balance_nano=1_000)
    await storage.heartbeat("dead")
    await storage.heartbeat("live")
    assert await storage.reserve(reservation(p, "d1", 100, "dead"))
    assert await storage.reserve(reservation(p, "d2", 200, "never-beat"))
    assert await storage.reserve(reservation(p, "l1", 300, "live"))
    time_before = time.time()
    while time.time() - time_before < 0.35:
        await storage.heartbeat("live")
        await asyncio.sleep(0.05)
    assert await storage.release_orphaned_reservations(0.3) == 2
    assert [r.request_id for r in await storage.open_reservations()] == ["l1"]
    assert await storage.release_orphaned_reservations(0.3) == 0
    user = await storage.get_user(p.user.id)
    assert user is not None and (user.balance_nano, user.used_nano) == (700, 0)
    logs = (await storage.log_page(p.user.id, 1, 10)).items
    assert {(x.request_id, x.outcome) for x in logs} == {("d1", "crash_released"), ("d2", "crash_released")}
    assert await storage.release_instance_reservations("live") == 1
    assert await storage.open_reservations("live") == []
    assert await storage.audit() == []


async def test_audit_detects_tampering(storage: Storage, new_principal: NewPrincipal,
                                       database_url: str) -> None:
    p = await new_principal(balance_nano=1_000)
    r = reservation(p, "x", 100)
    assert await storage.reserve(r)
    await storage.settle_many([Settlement(r, 60)])
    assert await storage.audit() == []
    await _raw_execute(database_url, "UPDATE users SET balance_nano = balance_nano + 5")
    await _raw_execute(database_url, "UPDATE api_keys SET reserved_nano = 7")
    problems = await storage.audit()
    subjects = {(x.subject, x.problem.split(" ")[0]) for x in problems}
    assert (f"user {p.user.id}", "balance_nano") in subjects
    assert (f"key {p.key.id}", "reserved_nano") in subjects
    await _raw_execute(database_url, "UPDATE users SET balance_nano = -1")
    assert any("negative" in x.problem for x in await storage.audit())


async def _raw_execute(database_url: str, sql: str) -> None:
    if database_url.startswith("sqlite:///"):
        import aiosqlite

        async with aiosqlite.connect(database_url[len("sqlite:///"):]) as conn:
            await conn.execute(sql)
            await conn.commit()
    else:
        import asyncpg

        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()


# --- request logs and usage --------------------------------------------------------------------------
async def test_log_page_and_daily_costs(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(balance_nano=10**9)
    day = 86_400
    base = 1_700_006_400  # 2023-11-15T00:00:00Z
    logs = [request_log(p, f"r{i}", model="m-a" if i % 2 else "m-b", created_at=base + i * day / 2)
            for i in range(6)]
    for i, log in enumerate(logs):
        log.charge_nano = 10 * (i + 1)
    await storage.write_logs(logs)
    page1 = await storage.log_page(p.user.id, 1, 4)
    page2 = await storage.log_page(p.user.id, 2, 4)
    assert page1.total == page2.total == 6
    assert [x.request_id for x in page1.items + page2.items] == [f"r{i}" for i in range(5, -1, -1)]
    assert page1.items[-1] == logs[2]  # every field round-trips
    costs = await storage.daily_costs(p.key.id, base, base + 2 * day)  # r0..r3
    assert [(c.day, c.model, c.cost_nano) for c in costs] == [
        ("2023-11-15", "m-a", 20), ("2023-11-15", "m-b", 10),
        ("2023-11-16", "m-a", 40), ("2023-11-16", "m-b", 30)]
    other = await new_principal()
    assert await storage.daily_costs(other.key.id, base, base + 10 * day) == []
    assert (await storage.log_page(other.user.id, 1, 10)).total == 0


async def test_request_log_columns_cover_record() -> None:
    text = "".join(m.sql for m in load_migrations())
    for field in RequestLog.__struct_fields__:
        assert f"    {field} " in text or f"ALTER TABLE request_logs ADD COLUMN {field} " in text, field


# --- tasks -------------------------------------------------------------------------------------------
async def test_tasks_compare_and_swap(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal()
    now = time.time()
    task = await storage.create_task(TaskRecord(
        task_id="task-1", user_id=p.user.id, key_id=p.key.id, family="videoa", action="generate",
        model="videoa-2-5", request_id="req-1", upstream="sim-video", upstream_task_id="up-1",
        status="queued", request_json='{"model": "videoa-2-5"}', billing_status="reserved",
        reserved_nano=500, notify_hook="https://example.com/cb", state="s", next_poll_at=now - 1))
    assert task.version == 0 and task.created_at > 0
    assert await storage.get_task("task-1") == task
    assert await storage.get_task("nope") is None
    assert [t.task_id for t in await storage.due_tasks(now, 10)] == ["task-1"]
    moved = await storage.update_task_cas("task-1", 0, {"status": "generating", "progress": "40%",
                                                        "next_poll_at": now + 60})
    assert moved is not None and moved.version == 1 and moved.status == "generating"
    assert await storage.update_task_cas("task-1", 0, {"status": "failed"}) is None  # lost the race
    assert await storage.due_tasks(now, 10) == []
    done = await storage.update_task_cas("task-1", 1, {
        "status": "completed", "billing_status": "charged", "charged_nano": 400, "result_json": "{}",
        "finished_at": now, "next_poll_at": None})
    assert done is not None and done.version == 2 and done.finished_at == now
    with pytest.raises(ValueError):
        await storage.update_task_cas("task-1", 2, {"version": 9})


async def test_group_reserve_isolates_a_failing_reservation(storage: Storage,
                                                            new_principal: NewPrincipal) -> None:
    """Concurrent reserves share a transaction; a bad one (a request id already held) fails alone,
    and one that does not fit changes nothing for the others."""
    p = await new_principal(balance_nano=1_000)
    attempts = [reservation(p, "dup", 100), reservation(p, "dup", 100), reservation(p, "big", 10_000),
                *(reservation(p, f"ok{i}", 100) for i in range(5))]
    results = await asyncio.gather(*(storage.reserve(r) for r in attempts), return_exceptions=True)
    assert sum(r is True for r in results[:2]) == 1
    assert sum(isinstance(r, Exception) for r in results[:2]) == 1
    assert results[2:] == [False, True, True, True, True, True]
    user = await storage.get_user(p.user.id)
    assert user is not None and user.balance_nano == 400
    assert await storage.audit() == []
