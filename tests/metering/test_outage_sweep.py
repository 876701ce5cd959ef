"""The orphan sweeper and database outages (issue 38, point 3), and the pruning of the instances
table (point 4), on both backends.

A process whose own heartbeat failed (the database was out of its reach) sweeps nobody until
``stale_after_s`` after it is back: its peers were as silent as it was. A sweep writes the
sweeper's own heartbeat first. An instance row silent for an hour and holding nothing goes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from gateway.accounts.metering.meter import Meter
from gateway.storage.base import Storage, StorageUnavailable
from gateway.storage.rows import Reservation
from gateway.storage.sql_common import INSTANCE_ROWS_KEPT_S
from gateway.storage.testing import NewPrincipal

STALE_S = 0.4


async def _instances(storage: Storage) -> set[str]:
    rows = await storage._fetch("SELECT instance FROM instances")  # type: ignore[attr-defined]
    return {r["instance"] for r in rows}


async def test_a_sweeper_back_from_an_outage_waits_before_sweeping_anyone(
        storage: Storage, meters: Callable[..., Meter], new_principal: NewPrincipal,
        monkeypatch: pytest.MonkeyPatch) -> None:
    principal = await new_principal(10**9)
    await storage.heartbeat("peer")
    hold = Reservation(request_id="req-peer", user_id=principal.user.id, key_id=principal.key.id,
                       amount_nano=1000, instance="peer")
    assert await storage.reserve(hold)
    sweeper = meters("sweeper", heartbeat_s=0.1, stale_after_s=STALE_S)
    await sweeper.start()
    real_heartbeat = storage.heartbeat

    async def out_of_reach(instance: str) -> None:
        raise StorageUnavailable()

    # The database goes out of the sweeper's reach (its heartbeats fail) for longer than
    # stale_after_s; the peer is as silent meanwhile.
    monkeypatch.setattr(storage, "heartbeat", out_of_reach)
    await asyncio.sleep(STALE_S * 2)
    assert [r.request_id for r in await storage.open_reservations()] == ["req-peer"]
    monkeypatch.setattr(storage, "heartbeat", real_heartbeat)
    back = time.monotonic()
    # Back: sweeps run (their heartbeats are written) but release nothing for stale_after_s.
    while time.monotonic() - back < STALE_S * 0.75:
        assert [r.request_id for r in await storage.open_reservations()] == ["req-peer"]
        await asyncio.sleep(0.02)
    # The peer stays silent a whole stale_after_s after the database came back: it is dead.
    deadline = back + STALE_S * 4
    while await storage.open_reservations():
        assert time.monotonic() < deadline, "the dead peer's hold was never released"
        await asyncio.sleep(0.02)


async def test_instance_rows_silent_for_an_hour_are_pruned(storage: Storage) -> None:
    now = time.time()

    async def old_rows(tx: Any) -> None:
        for name, silent_s in (("gone", INSTANCE_ROWS_KEPT_S + 60), ("recent", 60.0)):
            await tx.execute("INSERT INTO instances (instance, started_at, last_seen) VALUES (?, ?, ?)",
                             (name, now - silent_s - 10, now - silent_s))

    await storage._write(old_rows)  # type: ignore[attr-defined]
    await storage.heartbeat("alive")
    await storage.release_orphaned_reservations(10.0)
    assert await _instances(storage) == {"alive", "recent"}
