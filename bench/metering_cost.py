"""What the metering's database writes cost per call, without HTTP: the ``Meter`` on SQLite, as
``gateway serve`` runs it, reserving and settling calls one after another.

    .venv/bin/python -m bench.metering_cost [--calls 3000] [--dir /tmp]

Figures, each CPU of this process (user + system) per call:

* ``paced``: one call at a time with 1 ms between its reservation and its settlement (an upstream
  that answers in 1 ms: concurrency 1). Each reservation is its own transaction; the settlements
  are group-committed every ``flush_interval_s``.
* ``back to back``: the same without the pause.
* ``16 at once``: 16 such paced callers together, so the reservations are group-committed too.
* ``bare transaction``: ``BEGIN IMMEDIATE``, an ``UPDATE`` of one row in each of 1 (or 5) tables,
  ``COMMIT``, on a file in the same directory with the gateway's pragmas: the fixed cost (locks, a
  WAL frame per page) any transaction pays, and what each more page written costs. A reservation
  writes 5 pages (the user, the key, the hold, the ledger row, SQLite's autoincrement counter).
* ``idle wake``: the event loop woken by a 1 ms timer with nothing else to do (subtracted from the
  paced figures, which sleep as often).
* ``2,000 at once from a lease``: 2,000 holds on one key asked at the same instant from its quota
  lease, as the relay asks (the opening of ``make bench``'s 2,000 slow streams), until the last
  is held; the slab transactions it took are counted in brackets.

This is the part of the hot path that a transaction per call costs at concurrency 1, measured on
its own, where the end-to-end benchmark cannot separate it (``bench/results/profile-after.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import KeyRecord, Principal, RequestLog
from gateway.server.servers import event_loop_factory
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.rows import Reservation

PAUSE_S = 0.001
BURST = 2_000
HOLD_NANO = 1_000_000
CHARGE_NANO = 400_000


def _log(request_id: str, principal: Principal) -> RequestLog:
    return RequestLog(request_id=request_id, created_at=time.time(), user_id=principal.user.id,
                      key_id=principal.key.id, token_name=principal.key.name, route="/v1/chat/completions",
                      family="chat", model="bench", status=200, outcome="success", prompt_tokens=12,
                      completion_tokens=30)


async def _idle_wakes(n: int, pause_s: float) -> float:
    start = time.process_time()
    for _ in range(n):
        await asyncio.sleep(pause_s)
    return time.process_time() - start


async def _meter_figures(directory: Path, calls: int) -> dict[str, float]:
    storage = open_storage(f"sqlite:///{directory}/metering.db")
    await storage.open()
    user = await storage.create_user("bench", "default", 10**18, "bench-token", "bench-topup")
    key = await storage.create_key(KeyRecord(id=0, user_id=user.id, name="bench", key_hash="bench",
                                             masked="sk-b"))
    principal = Principal(key, user, "127.0.0.1")
    meter = Meter(storage, "bench-metering")
    await meter.start()
    serial = 0

    async def one(pause_s: float) -> None:
        nonlocal serial
        serial += 1
        request_id = f"bench-{serial}"
        hold = await meter.reserve(request_id, principal, HOLD_NANO)
        if pause_s:
            await asyncio.sleep(pause_s)
        meter.finish(_log(request_id, principal), hold, CHARGE_NANO)

    async def run(callers: int, pause_s: float) -> float:
        per_caller = calls // callers
        await meter.flush()
        start = time.process_time()

        async def caller() -> None:
            for _ in range(per_caller):
                await one(pause_s)

        await asyncio.gather(*(caller() for _ in range(callers)))
        await meter.flush()
        return (time.process_time() - start) / (per_caller * callers)

    try:
        await run(1, 0.0)  # warm up: statement cache, pages
        idle = await _idle_wakes(calls, PAUSE_S) / calls
        paced = await run(1, PAUSE_S) - idle
        back_to_back = await run(1, 0.0)
        together = await run(16, PAUSE_S) - idle / 16  # 16 callers share each wake
        burst, slabs = await _burst(storage, principal, meter, BURST)
        return {"paced": paced, "back to back": back_to_back, "16 at once": together, "idle wake": idle,
                f"{BURST:,} at once from a lease ({slabs} slab transactions)": burst}
    finally:
        await meter.stop()
        await storage.close()


async def _burst(storage: Storage, principal: Principal, meter: Meter, calls: int) -> tuple[float, int]:
    """CPU per hold of ``calls`` holds asked at once from the key's lease, and the slab
    transactions they took (counted on ``storage.reserve``)."""
    slabs = 0
    reserve = storage.reserve

    async def counted(reservation: Reservation, room_nano: int | None = None) -> bool:
        nonlocal slabs
        slabs += reservation.lease is not None
        return await reserve(reservation, room_nano)

    storage.reserve = counted  # type: ignore[method-assign]
    try:
        start = time.process_time()
        holds = await asyncio.gather(*(meter.reserve(f"burst-{i}", principal, HOLD_NANO, from_lease=True)
                                       for i in range(calls)))
        spent = (time.process_time() - start) / calls
    finally:
        storage.reserve = reserve  # type: ignore[method-assign]
    for i, hold in enumerate(holds):
        meter.finish(_log(f"burst-{i}", principal), hold, CHARGE_NANO)
    await meter.flush()
    return spent, slabs


def _bare_transaction(directory: Path, n: int, pages: int) -> float:
    """One row updated in each of ``pages`` tables: a commit appends that many pages to the WAL."""
    conn = sqlite3.connect(directory / f"bare-{pages}.db", isolation_level=None)
    for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "wal_autocheckpoint = 0"):
        conn.execute(f"PRAGMA {pragma}")
    for table in range(pages):
        conn.execute(f"CREATE TABLE t{table} (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        conn.execute(f"INSERT INTO t{table} VALUES (1, 0)")
    start = time.process_time()
    for _ in range(n):
        conn.execute("BEGIN IMMEDIATE")
        for table in range(pages):
            conn.execute(f"UPDATE t{table} SET v = v + 1 WHERE id = 1")
        conn.execute("COMMIT")
    spent = time.process_time() - start
    conn.close()
    return spent / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--dir", default=None, help="where the databases are made (default: the temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        directory = Path(tmp)
        factory = event_loop_factory()
        with asyncio.Runner(loop_factory=factory) as runner:
            figures = runner.run(_meter_figures(directory, args.calls))
        for pages in (1, 5):
            figures[f"bare transaction, {pages} page{'s' * (pages > 1)}"] = _bare_transaction(
                directory, args.calls, pages)
    print(f"{args.calls} calls, SQLite {sqlite3.sqlite_version}, {'uvloop' if factory else 'asyncio'}\n")
    print("| figure | CPU us per call |\n|---|---:|")
    for name, seconds in figures.items():
        print(f"| {name} | {seconds * 1e6:.1f} |")


if __name__ == "__main__":
    main()
