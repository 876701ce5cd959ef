"""Several pollers on one database (two gateway apps: the same as two replicas), a restart in the
middle of a task, a poller that died holding leases, and a submission lost with its process. On
SQLite and on PostgreSQL (required with CI=true)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from gateway.settings.config import Config
from gateway.storage import open_storage
from gateway.storage.rows import DURABLE_HOLDER, Reservation, TaskRecord
from gateway.tasks import Snapshot, engine_of
from tests.conftest import GatewayHandle, StartGateway
from tests.tasks.helpers import (
    PRICE_NANO,
    balance_nano,
    submit,
    wait_stored,
    wait_task,
    with_user,
)
from tests.tasks.test_callbacks import Receiver, receiver

__all__ = ["receiver"]

METERING = {"heartbeat_s": 0.2, "stale_after_s": 0.6}


async def _ledger(gw: GatewayHandle) -> Counter[tuple[str, str]]:
    storage: Any = gw.gateway.storage
    rows = await storage._fetch("SELECT request_id, kind FROM ledger WHERE kind <> 'topup'")
    return Counter((r["request_id"], r["kind"]) for r in rows)


async def test_two_pollers_charge_and_refund_once(gateway_server: StartGateway, database_url: str,
                                                  task_config: Callable[..., Config],
                                                  receiver: Receiver) -> None:
    config = task_config(database=database_url, tasks={"callback_allowlist": ["127.0.0.1"],
                                                       "poll_first_s": 0.02, "poll_interval_s": 0.03})
    a = await with_user(await gateway_server(config))
    b = await gateway_server(config)
    before, _ = await balance_nano(a)
    prompts = [f"p{i} sim:dur400" + (" sim:taskfail" if i % 3 == 0 else "") for i in range(9)]
    replies = await asyncio.gather(*(submit(a, "imagine", {"prompt": p, "notifyHook": receiver.url()})
                                     for p in prompts))
    ids = [r.json()["result"] for r in replies]
    tasks = [await wait_stored(b, i, lambda t: t.finished_at is not None) for i in ids]
    failed = sum(t.status == "FAILURE" for t in tasks)
    assert failed == 3
    ledger = await _ledger(a)
    for task in tasks:
        closing = "settle" if task.status == "SUCCESS" else "release"
        assert ledger[(task.request_id, "reserve")] == 1 and ledger[(task.request_id, closing)] == 1
        assert sum(n for (rid, _), n in ledger.items() if rid == task.request_id) == 2
    assert await balance_nano(a) == (before - 6 * PRICE_NANO, 6 * PRICE_NANO)
    assert await a.gateway.storage.audit() == []
    # Each final status was called back once, whichever poller saw it.
    await asyncio.sleep(0.3)
    finals = Counter(c["id"] for c in receiver.received if c["status"] in ("SUCCESS", "FAILURE"))
    assert finals == Counter({i: 1 for i in ids})
    # Both pollers did work (the leases spread the tasks, nobody polled them all twice).
    assert engine_of(a.gateway).poller.cycles > 0 and engine_of(b.gateway).poller.cycles > 0


async def test_duplicate_polls_apply_once(gateway_server: StartGateway, database_url: str,
                                          task_config: Callable[..., Config]) -> None:
    """Two replicas that read the same state and both learn the task finished: one change wins;
    a refund racing a charge: one of them, once."""
    config = task_config(database=database_url, tasks={"poll_first_s": 30, "poll_interval_s": 30})
    a = await with_user(await gateway_server(config))
    b = await gateway_server(config)
    before, _ = await balance_nano(a)
    for outcome in ("succeeded", "failed"):
        task_id = (await submit(a, "imagine", {"prompt": "dup"})).json()["result"]
        task = await a.gateway.storage.get_task(task_id)
        assert task is not None
        ea, eb = engine_of(a.gateway), engine_of(b.gateway)
        family = ea.family("imagetask")
        snap = Snapshot(status="SUCCESS" if outcome == "succeeded" else "FAILURE", phase=outcome,  # type: ignore[arg-type]
                        progress="100%", fail_reason="boom" if outcome == "failed" else None)
        results = await asyncio.gather(ea.apply(family, task, snap, time.time()),
                                       eb.apply(eb.family("imagetask"), task, snap, time.time()),
                                       ea.fail(family, task, "timed out"), eb.fail(family, task, "timed out"))
        assert sum(r is not None for r in results) == 1
    ledger = await _ledger(a)
    assert all(n == 1 for n in ledger.values()) and len(ledger) == 4
    user_balance, used = await balance_nano(a)
    assert before - user_balance == used and used in (0, PRICE_NANO, 2 * PRICE_NANO)
    assert await a.gateway.storage.audit() == []


async def test_restart_in_the_middle_of_a_task(gateway_server: StartGateway, database_url: str,
                                               task_config: Callable[..., Config]) -> None:
    config = task_config(database=database_url, metering=METERING)
    first = await with_user(await gateway_server(config))
    before, _ = await balance_nano(first)
    task_id = (await submit(first, "imagine", {"prompt": "survives sim:dur1500"})).json()["result"]
    await wait_stored(first, task_id, lambda t: t.status == "IN_PROGRESS")
    await first.stop()
    # The hold outlived its process: still open, durable, and the books add up.
    storage = open_storage(database_url)
    await storage.open()
    try:
        holds = await storage.open_reservations()
        assert [h.instance for h in holds] == [DURABLE_HOLDER]
        assert await storage.audit() == []
    finally:
        await storage.close()
    await asyncio.sleep(METERING["stale_after_s"] + 0.1)  # the first process is long silent
    second = await gateway_server(config)
    second.user, second.key_record = first.user, first.key_record
    task = await wait_task(second, task_id)
    assert task["status"] == "SUCCESS"
    assert await balance_nano(second) == (before - PRICE_NANO, PRICE_NANO)
    assert await second.gateway.storage.open_reservations() == []
    assert await second.gateway.storage.audit() == []


async def test_dead_pollers_leases_are_taken_over(gateway_server: StartGateway, database_url: str,
                                                  task_config: Callable[..., Config]) -> None:
    config = task_config(database=database_url)
    gw = await with_user(await gateway_server(config))
    # Long enough that the claim below never races the task's end: this process's own poller
    # claims it too, every 0.1 s, and a short task could be finished before the claim succeeds.
    task_id = (await submit(gw, "imagine", {"prompt": "orphan sim:dur1500"})).json()["result"]
    storage = gw.gateway.storage
    # Another replica claims it and dies without a word: nobody polls it until its lease ends.
    await wait_stored(gw, task_id,
                      lambda t: t.next_poll_at is not None and t.next_poll_at <= time.time() + 0.1)
    claimed: list[TaskRecord] = []
    deadline = time.monotonic() + 3
    while not claimed and time.monotonic() < deadline:
        claimed = [t for t in await storage.claim_due_tasks(time.time(), 10, "dead-replica", 0.8)
                   if t.task_id == task_id]
        await asyncio.sleep(0.005)
    assert claimed, "could not claim the task"
    await asyncio.sleep(0.4)  # four poll intervals
    stored = await storage.get_task(task_id)
    # Leased away: not polled (every poll is a transition, which bumps the version).
    assert stored is not None and stored.finished_at is None and stored.version == claimed[0].version
    done = await wait_stored(gw, task_id, lambda t: t.finished_at is not None, timeout_s=5)
    assert done.status == "SUCCESS" and done.billing_status == "charged"


async def test_submission_lost_with_its_process_is_refunded(gateway_server: StartGateway, database_url: str,
                                                            task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config(database=database_url)))
    storage = gw.gateway.storage
    before = await balance_nano(gw)
    # What a process that died between its hold and the upstream's answer leaves behind.
    task = TaskRecord(task_id=secrets.token_hex(8), user_id=gw.user["id"], key_id=gw.key_record["id"],
                      family="imagetask", action="IMAGINE", request_id="req_lost", upstream="sim-image",
                      status="NOT_START", billing_status="reserved", reserved_nano=PRICE_NANO,
                      price_nano=PRICE_NANO, next_poll_at=time.time())
    assert await storage.reserve(Reservation("req_lost", gw.user["id"], gw.key_record["id"], PRICE_NANO,
                                             DURABLE_HOLDER))
    assert (await balance_nano(gw))[0] == before[0] - PRICE_NANO
    await storage.create_task(task)
    done = await wait_stored(gw, task.task_id, lambda t: t.finished_at is not None)
    assert done.status == "FAILURE" and "never reached" in (done.fail_reason or "")
    assert await balance_nano(gw) == before
    assert await storage.audit() == []
