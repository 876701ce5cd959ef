"""Quota leases (gateway.accounts.metering.quota_leases) on both backends: calls held in memory from a slab
that is one durable reservation row, settled exactly, never overspending on one process or two,
a key changed elsewhere never served from a slab, idle slabs given back, kill -9 leaving clean
books."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.accounts.metering import quota_leases
from gateway.accounts.metering.audit import run_audit
from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import KeyRecord
from gateway.runtime.errors import InsufficientQuota, InvalidApiKey
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.rows import KeyChanges
from gateway.storage.testing import NewPrincipal, sample_log
from tests.metering.test_crash import CHILD, kill_when_busy

WORST = 1_000
ROOMY = 10**12  # far more than LEASE_SHARE slabs: calls hold from leases


async def leased_call(meter: Meter, principal: Any, request_id: str, actual: int,
                      served: asyncio.Event | None = None, admitted: list[str] | None = None) -> bool:
    try:
        hold = await meter.reserve(request_id, principal, WORST, from_lease=True)
    except InsufficientQuota:
        return False
    if admitted is not None:
        admitted.append(request_id)
    if served is not None:
        await served.wait()
    else:
        await asyncio.sleep(0.001)
    meter.finish(sample_log(principal, request_id), hold, actual)
    return True


async def test_calls_hold_from_one_row_and_settle_exactly(storage: Storage, new_principal: NewPrincipal,
                                                          meters) -> None:
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    go = asyncio.Event()
    admitted: list[str] = []
    calls = [asyncio.create_task(leased_call(meter, p, f"c-{i}", 600, go, admitted)) for i in range(40)]
    for _ in range(2000):  # until every call is admitted (none has finished)
        if len(admitted) == 40:
            break
        await asyncio.sleep(0.001)
    assert len(admitted) == 40
    rows = await storage._fetch("SELECT request_id FROM reservations WHERE key_id = ?", (p.key.id,))
    assert [r["request_id"] for r in rows] == [f"lease:inst-a:{p.key.id}"]  # one row, not forty
    assert await storage.open_reservations() == []  # no call holds a row of its own
    assert (await storage.lease_holds([p.user.id]))[p.user.id] >= 40 * WORST
    go.set()
    assert all(await asyncio.gather(*calls))
    await meter.flush()
    key, user = await storage.get_key(p.key.id), await storage.get_user(p.user.id)
    assert key is not None and user is not None
    assert (key.spent_nano, key.reserved_nano) == (40 * 600, 0)
    assert (user.balance_nano, user.used_nano, user.request_count) == (ROOMY - 40 * 600, 40 * 600, 40)
    assert await storage.open_reservations() == []
    page = await storage.log_page(p.user.id, 1, 100)
    assert page.total == 40 and {x.charge_nano for x in page.items} == {600}
    assert await run_audit(storage) == []


async def test_a_burst_on_one_key_takes_a_few_slabs_not_one_per_slab_of_calls(
        storage: Storage, new_principal: NewPrincipal, meters, monkeypatch: pytest.MonkeyPatch) -> None:
    """500 calls at once: the slab asked while calls wait covers them too, so the burst takes two
    transactions (the first call's slab, then the waiting calls' share), not one per
    ``LEASE_CALLS`` calls, each waking every call still waiting."""
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    asked: list[int] = []
    reserve = storage.reserve

    async def counted(hold: Any, *args: Any, **kwargs: Any) -> bool:
        if hold.lease is not None:
            asked.append(hold.amount_nano)
        return bool(await reserve(hold, *args, **kwargs))

    monkeypatch.setattr(storage, "reserve", counted)
    go = asyncio.Event()
    calls = [asyncio.create_task(leased_call(meter, p, f"b-{i}", 600, go)) for i in range(500)]
    await asyncio.sleep(0.5)
    go.set()
    assert all(await asyncio.gather(*calls))
    assert len(asked) <= 3, asked
    assert sum(asked) >= 500 * WORST
    await meter.flush()
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []


async def test_charge_above_the_hold_comes_from_the_slab(storage: Storage, new_principal: NewPrincipal,
                                                         meters) -> None:
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    assert await leased_call(meter, p, "over", 5 * WORST)
    await meter.flush()
    [entry] = (await storage.log_page(p.user.id, 1, 10)).items
    assert (entry.charge_nano, entry.uncharged_nano) == (5 * WORST, 0)
    user = await storage.get_user(p.user.id)
    assert user is not None and user.balance_nano == ROOMY - 5 * WORST
    assert await run_audit(storage) == []


@pytest.mark.parametrize("processes", [1, 2])
async def test_never_overspend_near_exhaustion(storage: Storage, new_principal: NewPrincipal, meters,
                                               processes: int) -> None:
    """The balance covers 300 worst cases, enough for slabs at first: 400 calls at once on one or
    two processes serve at most 300, never overdraw, and leave clean books. On one process every
    call that fits is served (its own unused slab goes back before a call is refused); across two,
    at most the other process's slab can be short."""
    fits = 300
    assert fits * WORST >= quota_leases.LEASE_SHARE * quota_leases.LEASE_CALLS * WORST  # slabs at first
    p = await new_principal(balance_nano=fits * WORST)
    group = [meters(f"inst-{n}") for n in range(processes)]
    for meter in group:
        await meter.start()
    results = await asyncio.gather(*(leased_call(group[i % processes], p, f"r-{i}", WORST)
                                     for i in range(400)))
    for meter in group:
        await meter.flush()
    served = sum(results)
    assert served <= fits
    slab = quota_leases.LEASE_CALLS * WORST
    assert served >= fits - (processes - 1) * slab // WORST
    if processes == 1:
        assert served == fits
    user, key = await storage.get_user(p.user.id), await storage.get_key(p.key.id)
    assert user is not None and key is not None
    assert user.balance_nano == (fits - served) * WORST >= 0
    assert user.used_nano == key.spent_nano == served * WORST and key.reserved_nano == 0
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []


async def test_key_disabled_elsewhere_is_never_served_from_a_slab(
        storage: Storage, new_principal: NewPrincipal, meters) -> None:
    """Another process disables the key (and bumps the auth version): this process's auth cache
    still has the enabled record, yet its next call is refused, not served from the slab."""
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    assert await leased_call(meter, p, "before", WORST)
    assert await storage.update_key(p.key.id, KeyChanges(enabled=False)) is not None
    await storage.bump_auth_version()
    with pytest.raises(InvalidApiKey):
        await meter.reserve("after", p, WORST, from_lease=True)
    await meter.flush()
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []


async def test_one_auth_version_read_serves_the_calls_that_arrived_before_it(
        storage: Storage, new_principal: NewPrincipal, meters, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read begun after a call arrived serves it; a call that arrives after a change on another
    process reads anew and is refused. (On SQLite the version is shared in memory instead: that
    read is taken away here to test the reads themselves.)"""
    monkeypatch.setattr(storage, "shared_auth_version", lambda: None)
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    reads = 0
    read = storage.auth_version

    async def counted() -> int:
        nonlocal reads
        reads += 1
        return await read()

    monkeypatch.setattr(storage, "auth_version", counted)
    arrived = time.perf_counter()
    holds = [await meter.reserve(f"early-{i}", p, WORST, from_lease=True, arrived=arrived)
             for i in range(5)]  # all arrived before the first read began
    assert reads == 1
    assert await storage.update_key(p.key.id, KeyChanges(enabled=False)) is not None
    await storage.bump_auth_version()
    with pytest.raises(InvalidApiKey):
        await meter.reserve("late", p, WORST, from_lease=True, arrived=time.perf_counter())
    assert reads == 2
    for hold in holds:
        meter.finish(sample_log(p, hold.request_id), hold, WORST)
    await meter.flush()
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []


async def test_an_idle_slab_goes_back_by_itself(storage: Storage, new_principal: NewPrincipal,
                                                meters) -> None:
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    assert await leased_call(meter, p, "only", 600)
    assert await storage.lease_holds([p.user.id])
    for _ in range(100):  # no flush asked: the idle return and the batch writer do it
        if not await storage.lease_holds([p.user.id]):
            break
        await asyncio.sleep(0.05)
    assert await storage.lease_holds([p.user.id]) == {}
    user = await storage.get_user(p.user.id)
    assert user is not None and (user.balance_nano, user.request_count) == (ROOMY - 600, 1)
    assert await run_audit(storage) == []


async def test_reads_of_balances_see_what_a_slab_holds_unused(storage: Storage, new_principal: NewPrincipal,
                                                              meters) -> None:
    p = await new_principal(balance_nano=ROOMY)
    meter = meters()
    await meter.start()
    assert await leased_call(meter, p, "seen", 600)
    await meter.settled()  # what the account views and the admin API ask before reading balances
    user = await storage.get_user(p.user.id)
    assert user is not None and user.balance_nano == ROOMY - 600


async def test_views_count_another_processs_slab_as_unspent(storage: Storage, new_principal: NewPrincipal,
                                                            meters) -> None:
    """Process B still holds a slab (idle for less than a second) when process A is asked for the
    user: the balance shown is the money not spent, B's slab included."""
    p = await new_principal(balance_nano=ROOMY)
    a, b = meters("inst-a"), meters("inst-b")
    await a.start()
    await b.start()
    assert await leased_call(b, p, "on-b", 600)
    await b.flush(return_leases=False)  # the charge committed, the slab still held by B
    stored = await storage.get_user(p.user.id)
    assert stored is not None and stored.balance_nano < ROOMY - 600  # the slab is out of the balance
    shown = await a.balance_view(p.user.id)
    assert shown is not None and (shown.balance_nano, shown.used_nano) == (ROOMY - 600, 600)


@pytest.mark.slow
async def test_sigkill_with_slabs_held_leaves_clean_books(tmp_path: Path) -> None:
    """The crash test of test_crash.py with every call held from a lease: at the moment of death
    the books balance; the successor's sweeper gives the dead process's slab back in full."""
    url = f"sqlite:///{tmp_path}/crash.db"
    storage = open_storage(url)
    await storage.open()
    try:
        balance = 10**12
        user = await storage.create_user("u", "default", balance, "token-hash", "topup")
        key = await storage.create_key(KeyRecord(id=0, user_id=user.id, name="k", key_hash="key-hash",
                                                 masked="sk-..."))
        child = CHILD.replace("meter.reserve(rid, principal, 1000)",
                              "meter.reserve(rid, principal, 1000, from_lease=True)")
        assert child != CHILD
        await kill_when_busy(child, url, user.id, key.id)
        rows = await storage._fetch("SELECT request_id, instance FROM reservations")
        assert [(r["request_id"], r["instance"]) for r in rows] == [(f"lease:child:{key.id}", "child")]
        assert await run_audit(storage) == []

        successor = Meter(storage, "successor", heartbeat_s=0.1, stale_after_s=0.5)
        await successor.start()
        try:
            for _ in range(100):
                if not await storage.lease_holds([user.id]):
                    break
                await asyncio.sleep(0.05)
            assert await storage.lease_holds([user.id]) == {}
        finally:
            await successor.stop()
        assert await run_audit(storage) == []
        # The slab's release is in the ledger, not in the request log: it was no request.
        logged = (await storage.log_page(user.id, 1, 10**6)).items
        assert not [x for x in logged if x.outcome == "crash_released"]
        after, key_after = await storage.get_user(user.id), await storage.get_key(key.id)
        assert after is not None and key_after is not None
        assert after.balance_nano + after.used_nano == balance  # nothing held, nothing lost
        assert after.used_nano == key_after.spent_nano > 0 and key_after.reserved_nano == 0
    finally:
        await storage.close()
