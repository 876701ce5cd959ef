"""The Meter on both backends: concurrency limits, settlement, shutdown, retries, orphans."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from gateway.accounts.metering.audit import run_audit
from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import RequestLog
from gateway.runtime.errors import InsufficientQuota
from gateway.storage.base import Storage
from gateway.storage.rows import Reservation
from gateway.storage.testing import NewPrincipal, sample_log

PRICE = 1_000


async def call(meter: Meter, principal, request_id: str, worst: int, actual: int) -> bool:
    """One metered call: reserve the worst case, 'serve', settle the actual cost."""
    try:
        reservation = await meter.reserve(request_id, principal, worst)
    except InsufficientQuota:
        meter.finish(sample_log(principal, request_id, status=403, outcome="client_error",
                                error_code="insufficient_quota"), None, 0)
        return False
    await asyncio.sleep(0.001)
    meter.finish(sample_log(principal, request_id), reservation, actual)
    return True


@pytest.mark.parametrize("limit", ["key_quota", "user_balance"])
async def test_hundred_concurrent_calls_ten_fit(storage: Storage, new_principal: NewPrincipal,
                                                meters, limit: str) -> None:
    if limit == "key_quota":
        p = await new_principal(balance_nano=10**12, quota_nano=10 * PRICE)
    else:
        p = await new_principal(balance_nano=10 * PRICE)
    meter = meters()
    await meter.start()
    results = await asyncio.gather(*(call(meter, p, f"req-{i}", PRICE, PRICE) for i in range(100)))
    await meter.flush()
    assert sum(results) == 10
    key, user = await storage.get_key(p.key.id), await storage.get_user(p.user.id)
    assert key is not None and user is not None
    assert key.spent_nano == 10 * PRICE and key.reserved_nano == 0
    assert user.used_nano == 10 * PRICE and user.request_count == 10 and user.balance_nano >= 0
    if limit == "user_balance":
        assert user.balance_nano == 0
    assert await storage.open_reservations() == []
    page = await storage.log_page(p.user.id, 1, 200)
    assert page.total == 100
    assert sum(x.error_code == "insufficient_quota" for x in page.items) == 90
    assert await run_audit(storage) == []


async def test_finish_charges_actual_cost_and_reports(storage: Storage, new_principal: NewPrincipal,
                                                      meters) -> None:
    """Above the reservation, the excess is taken from the balance (docs/money.md)."""
    seen: list[RequestLog] = []
    p = await new_principal(balance_nano=10_000)
    meter = meters(on_finished=seen.append)
    await meter.start()
    r = await meter.reserve("big", p, 1_000)
    meter.finish(sample_log(p, "big"), r, 5_000)  # over the reservation: charged in full
    meter.finish(sample_log(p, "free", outcome="client_error"), None, 300)  # nothing reserved: free
    assert [(x.request_id, x.charge_nano) for x in seen] == [("big", 5_000), ("free", 0)]
    await meter.flush()
    user = await storage.get_user(p.user.id)
    assert user is not None and (user.balance_nano, user.used_nano) == (5_000, 5_000)
    assert {(x.request_id, x.charge_nano, x.uncharged_nano)
            for x in (await storage.log_page(p.user.id, 1, 10)).items} == {("big", 5_000, 0), ("free", 0, 0)}
    with pytest.raises(InsufficientQuota) as info:
        await meter.reserve("too-much", p, 5_001)
    assert info.value.status == 403 and info.value.code == "insufficient_quota"
    assert await run_audit(storage) == []


async def test_zero_reservation_for_free_models(storage: Storage, new_principal: NewPrincipal,
                                                meters) -> None:
    p = await new_principal(balance_nano=0)
    meter = meters()
    await meter.start()
    r = await meter.reserve("free", p, 0)
    assert [x.request_id for x in await storage.open_reservations()] == ["free"]
    meter.finish(sample_log(p, "free"), r, 0)
    await meter.flush()
    user = await storage.get_user(p.user.id)
    assert user is not None and user.request_count == 1
    assert await storage.open_reservations() == []


async def test_stop_flushes_and_releases_what_is_held(storage: Storage, new_principal: NewPrincipal,
                                                      meters) -> None:
    p = await new_principal(balance_nano=10_000)
    meter = meters(flush_interval_s=60)  # only stop() writes
    await meter.start()
    settled = await meter.reserve("settled", p, 1_000)
    await meter.reserve("in-flight", p, 2_000)
    meter.finish(sample_log(p, "settled"), settled, 400)
    assert meter.pending == 1
    await meter.stop()
    assert meter.pending == 0
    assert await storage.open_reservations() == []
    user = await storage.get_user(p.user.id)
    assert user is not None and (user.balance_nano, user.used_nano) == (9_600, 400)
    outcomes = {x.request_id: x.outcome for x in (await storage.log_page(p.user.id, 1, 10)).items}
    assert outcomes == {"settled": "success", "in-flight": "crash_released"}
    assert await run_audit(storage) == []


async def test_cancelled_reserve_leaves_nothing_held(storage: Storage, new_principal: NewPrincipal,
                                                     meters) -> None:
    p = await new_principal(balance_nano=10_000)
    meter = meters()
    await meter.start()
    tasks = [asyncio.create_task(meter.reserve(f"c{i}", p, 100)) for i in range(20)]
    await asyncio.sleep(0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await meter.flush()  # waits for the abandoned attempts, then writes their releases
    assert await storage.open_reservations() == []
    user = await storage.get_user(p.user.id)
    assert user is not None and user.balance_nano == 10_000
    assert await run_audit(storage) == []


class FlakyStorage:
    """Delegates to a real storage; ``settle_many`` fails while ``failing(items)`` says so."""

    def __init__(self, inner: Storage, failing: Callable[[list[str]], bool]) -> None:
        self._inner = inner
        self._failing = failing
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def settle_many(self, settlements, logs=()) -> None:
        ids = [s.reservation.request_id for s in settlements] + [x.request_id for x in logs]
        if self._failing(ids):
            self.failures += 1
            raise ConnectionError("database unreachable")
        await self._inner.settle_many(settlements, logs)


async def test_writer_retries_database_errors(storage: Storage, new_principal: NewPrincipal,
                                              caplog: pytest.LogCaptureFixture) -> None:
    p = await new_principal(balance_nano=10_000)
    flaky = FlakyStorage(storage, lambda ids: flaky.failures < 2)
    meter = Meter(flaky, "inst-flaky")  # type: ignore[arg-type]
    await meter.start()
    try:
        r = await meter.reserve("r", p, 500)
        with caplog.at_level(logging.ERROR, logger="gateway.accounts.metering.writer"):
            meter.finish(sample_log(p, "r"), r, 200)
            await asyncio.wait_for(meter.flush(), 5)
        assert flaky.failures == 2
        assert sum("ledger write" in rec.message for rec in caplog.records) == 2
        user = await storage.get_user(p.user.id)
        assert user is not None and user.used_nano == 200
    finally:
        await meter.stop(timeout_s=5)


async def test_writer_isolates_a_rejected_item(storage: Storage, new_principal: NewPrincipal,
                                               caplog: pytest.LogCaptureFixture) -> None:
    p = await new_principal(balance_nano=10_000)
    flaky = FlakyStorage(storage, lambda ids: "poison" in ids)
    meter = Meter(flaky, "inst-poison", flush_interval_s=0.05)  # type: ignore[arg-type]
    await meter.start()
    reservations = {rid: await meter.reserve(rid, p, 100) for rid in ("a", "poison", "b")}
    for rid, r in reservations.items():
        meter.finish(sample_log(p, rid), r, 100)
    with caplog.at_level(logging.ERROR, logger="gateway.accounts.metering.writer"):
        await asyncio.wait_for(meter.flush(), 5)
    user = await storage.get_user(p.user.id)
    assert user is not None and user.used_nano == 200  # "a" and "b"
    await meter.stop()
    assert any("gave up" in rec.getMessage() and "poison" in rec.getMessage() for rec in caplog.records)
    assert await storage.open_reservations() == []  # released in full at shutdown
    assert await run_audit(storage) == []


async def test_orphans_of_a_dead_instance_are_released(storage: Storage, new_principal: NewPrincipal,
                                                       meters) -> None:
    p = await new_principal(balance_nano=10_000)
    await storage.heartbeat("dead")
    assert await storage.reserve(Reservation("orphan", p.user.id, p.key.id, 700, "dead"))
    meter = meters(heartbeat_s=0.05, stale_after_s=0.2)
    await meter.start()
    for _ in range(40):
        if not await storage.open_reservations():
            break
        await asyncio.sleep(0.05)
    assert await storage.open_reservations() == []
    user = await storage.get_user(p.user.id)
    assert user is not None and user.balance_nano == 10_000
    assert await run_audit(storage) == []


async def test_start_releases_leftovers_of_the_same_instance_id(storage: Storage, new_principal: NewPrincipal,
                                                                meters) -> None:
    p = await new_principal(balance_nano=10_000)
    assert await storage.reserve(Reservation("old", p.user.id, p.key.id, 700, "inst-a"))
    await meters("inst-a").start()
    assert await storage.open_reservations() == []
