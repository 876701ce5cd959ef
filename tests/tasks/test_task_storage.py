"""The task engine's storage on both backends: claims under leases (disjoint, taken over when a
lease expires), compare-and-swap transitions that close a hold exactly once, and durable holds
that no process's sweep releases."""

from __future__ import annotations

import asyncio
import secrets
import time

from gateway.accounts.records import Principal
from gateway.storage.base import Storage
from gateway.storage.rows import DURABLE_HOLDER, Reservation, Settlement, TaskRecord
from gateway.storage.testing import NewPrincipal, new_principal, storage

__all__ = ["new_principal", "storage"]


def _task(principal: Principal, **fields: object) -> TaskRecord:
    values: dict[str, object] = {
        "task_id": secrets.token_hex(8), "user_id": principal.user.id, "key_id": principal.key.id,
        "family": "imagetask", "action": "IMAGINE", "request_id": "req_" + secrets.token_hex(8),
        "upstream": "sim", "upstream_task_id": "up-1", "status": "SUBMITTED", "billing_status": "reserved",
        "reserved_nano": 1000, "price_nano": 1000, "next_poll_at": time.time() - 1}
    values.update(fields)
    return TaskRecord(**values)  # type: ignore[arg-type]


async def _held(storage: Storage, principal: Principal, task: TaskRecord) -> Reservation:
    hold = Reservation(task.request_id, principal.user.id, principal.key.id, task.reserved_nano,
                       DURABLE_HOLDER)
    assert await storage.reserve(hold)
    await storage.create_task(task)
    return hold


async def test_claims_are_disjoint_and_leased(storage: Storage, new_principal: NewPrincipal) -> None:
    principal = await new_principal(10**9)
    for _ in range(12):
        await storage.create_task(_task(principal))
    now = time.time()
    a, b = await asyncio.gather(storage.claim_due_tasks(now, 12, "a", 0.3),
                                storage.claim_due_tasks(now, 12, "b", 0.3))
    ids_a, ids_b = {t.task_id for t in a}, {t.task_id for t in b}
    assert not ids_a & ids_b and len(ids_a | ids_b) == 12
    assert await storage.claim_due_tasks(time.time(), 12, "c", 0.3) == []  # all leased
    await asyncio.sleep(0.35)
    taken_over = await storage.claim_due_tasks(time.time(), 12, "c", 0.3)
    assert len(taken_over) == 12  # the leases expired: another poller takes the tasks over
    assert await storage.release_task_leases("c") == 12
    assert len(await storage.claim_due_tasks(time.time(), 12, "d", 0.3)) == 12


async def test_transition_closes_the_hold_exactly_once(storage: Storage, new_principal: NewPrincipal) -> None:
    principal = await new_principal(10**6)
    task = _task(principal)
    hold = await _held(storage, principal, task)
    task = await storage.get_task(task.task_id)
    assert task is not None
    charge = Settlement(hold, 1000)
    refund = Settlement(hold, 0)
    end = {"finished_at": time.time(), "next_poll_at": None}
    changes = {"status": "SUCCESS", "billing_status": "charged", **end}
    fail = {"status": "FAILURE", "billing_status": "refunded", **end}
    results = await asyncio.gather(
        storage.transition_task(task.task_id, task.version, changes, charge),
        storage.transition_task(task.task_id, task.version, fail, refund),
        storage.transition_task(task.task_id, task.version, changes, charge))
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    user = await storage.get_user(principal.user.id)
    assert user is not None
    if winners[0].status == "SUCCESS":
        assert (user.balance_nano, user.used_nano) == (10**6 - 1000, 1000)
    else:
        assert (user.balance_nano, user.used_nano) == (10**6, 0)
    assert await storage.open_reservations() == []
    assert await storage.audit() == []
    # A stale version changes nothing, money included.
    assert await storage.transition_task(task.task_id, task.version, fail, refund) is None
    assert await storage.audit() == []


async def test_durable_holds_outlive_processes(storage: Storage, new_principal: NewPrincipal) -> None:
    principal = await new_principal(10**6)
    task = _task(principal)
    await _held(storage, principal, task)
    await storage.heartbeat("gone-process")
    await asyncio.sleep(0.05)
    assert await storage.release_orphaned_reservations(0.0) == 0
    assert await storage.release_instance_reservations("gone-process") == 0
    assert [r.instance for r in await storage.open_reservations()] == [DURABLE_HOLDER]
    assert await storage.audit() == []


async def test_callback_outbox(storage: Storage, new_principal: NewPrincipal) -> None:
    principal = await new_principal(10**6)
    task = _task(principal)
    await storage.create_task(task)
    first = await storage.transition_task(task.task_id, 0, {"status": "IN_PROGRESS"}, None,
                                          ("http://h/1", "{}"))
    assert first is not None
    # A writer that lost the race queues nothing.
    assert await storage.transition_task(task.task_id, 0, {"status": "X"}, None, ("http://h/x", "{}")) is None
    second = await storage.transition_task(task.task_id, 1, {"status": "SUCCESS"}, None, ("http://h/2", "{}"))
    assert second is not None
    now = time.time()
    claimed = await storage.claim_task_callbacks(now, 10, "a", 0.3)
    assert [c.url for c in claimed] == ["http://h/1"]  # one task's callbacks leave in order
    assert await storage.claim_task_callbacks(now, 10, "b", 0.3) == []  # leased, and the next waits
    await storage.retry_task_callback(claimed[0].id, 1, time.time() + 0.2)
    assert await storage.claim_task_callbacks(time.time(), 10, "b", 0.3) == []  # backing off
    await asyncio.sleep(0.25)
    again = await storage.claim_task_callbacks(time.time(), 10, "b", 0.3)
    assert [(c.url, c.attempts) for c in again] == [("http://h/1", 1)]
    await storage.finish_task_callback(again[0].id)
    nxt = await storage.claim_task_callbacks(time.time(), 10, "b", 0.3)
    assert [c.url for c in nxt] == ["http://h/2"]
    assert await storage.release_callback_leases("b") == 1
