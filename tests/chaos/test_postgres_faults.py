"""Two ``gateway serve`` replicas on the test's own PostgreSQL cluster (and Redis), under load with
streams in flight, while the database is stopped longer than ``metering.stale_after_s`` and
started again, or hung (SIGSTOP of every process of the cluster) as long.

* Calls that need the database while it is away are 503 ``service_unavailable`` with
  ``Retry-After``, never a 500; each replica logs the outage once (ERROR), no stack trace.
* No replica sweeps the other (or itself) for a silence the outage explains: no ``crash_release``
  at all; the streams in flight are answered 200, charged and logged.
* Calls are served again once it is back; the replicas' quota leases go back once idle (nothing is
  held while they still run); after both stop, every call answered 200 is charged and logged, and
  ``gateway audit`` is clean.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import asyncpg
import pytest

from tests.chaos.fleet import TRACEBACK, Call, Fleet, call, check_money, keep_calling, tally
from tests.chaos.services import PostgresCluster, RedisServer

if TYPE_CHECKING:
    from tests.conftest import MakeConfig, SimulatorHandle

pytestmark = pytest.mark.slow  # its own PostgreSQL and Redis: not the machine's services

METERING = {"heartbeat_s": 0.5, "stale_after_s": 2.0}
OUTAGE_S = 3.5  # longer than stale_after_s: a sweep counting it would take the peer for dead
QUIET = {"access_log": False, "level": "WARNING"}
DATABASE_DOWN = "the database unavailable"
BALANCE_USD = 10
STREAM_TOKENS = 200  # x 30 ms: streams that outlast the outage
CEILING_USD = 0.0012  # a key's spending ceiling: about 75 of these calls, spent across the fault


def _config(make_config: MakeConfig, simulator: SimulatorHandle, dsn: str, redis: RedisServer) -> Any:
    return make_config(
        database=dsn, redis=redis.url, metering=METERING, logging=QUIET,
        models=[{"id": "sim-chat", "owned_by": "simulator",
                 "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}}],
        upstreams=[{"name": "sim-paced", "protocol": "chat", "base_url": simulator.base_url,
                    "api_key": "sk-sim-tok30", "models": ["sim-chat"]}])


async def _crash_releases(dsn: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT ts, request_id, delta_nano FROM ledger WHERE kind = 'crash_release'")
        return [dict(r) for r in rows]
    finally:
        await conn.close()


async def _through_a_fault(fleet: Fleet, fault: str, cluster: PostgresCluster) -> dict[str, Any]:
    """Load and streams on both replicas; the fault for ``OUTAGE_S``; load on for as long again."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        user = await fleet.admin(session, "POST", "/admin/users", {"name": "chaos", "quota_usd": BALANCE_USD})
        key = (await fleet.admin(session, "POST", "/admin/keys", {"user_id": user["id"]}))["key"]
        ceiling = await fleet.admin(session, "POST", "/admin/keys",
                                    {"user_id": user["id"], "name": "ceiling", "quota_usd": CEILING_USD})
        done = asyncio.Event()
        load = asyncio.create_task(keep_calling(session, fleet, key, done, tokens=4))
        capped = asyncio.create_task(keep_calling(session, fleet, ceiling["key"], done, workers=1, tokens=4,
                                                  pause_s=0.05))
        streams = [asyncio.create_task(call(session, fleet, i % 2, key, stream=True, tokens=STREAM_TOKENS))
                   for i in range(6)]
        await asyncio.sleep(1.0)
        began = time.monotonic()
        if fault == "stop":
            cluster.stop()
            ready = [await fleet.readyz(session, r) for r in (0, 1)]
            assert all(status == 503 and body["down"] == ["database"] for status, body in ready), ready
        else:
            cluster.hang()
        await asyncio.sleep(OUTAGE_S - (time.monotonic() - began))
        if fault == "stop":
            cluster.start()
        else:
            cluster.resume()
        back = time.monotonic()
        await asyncio.sleep(OUTAGE_S)
        assert [(await fleet.readyz(session, r))[0] for r in (0, 1)] == [200, 200]
        done.set()
        loaded, on_ceiling = await load, await capped
        streamed = list(await asyncio.gather(*streams))
    # The replicas still run: their quota leases go back once idle, nothing stays held.
    idle_since = time.monotonic()
    while held := await _held(fleet):
        assert time.monotonic() - idle_since < 5.0, f"still held after the fault, replicas idle: {held}"
        await asyncio.sleep(0.1)
    return {"user": user, "loaded": loaded, "streamed": streamed, "began": began, "back": back,
            "ceiling": ceiling, "on_ceiling": on_ceiling}


async def _check_ceiling(dsn: str, run: dict[str, Any]) -> dict[str, int]:
    """The key with a spending ceiling ran out across the fault and never went past it."""
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow("SELECT quota_nano, spent_nano, reserved_nano FROM api_keys WHERE id = $1",
                                  run["ceiling"]["id"])
    finally:
        await conn.close()
    assert row is not None and row["reserved_nano"] == 0
    assert 0 < row["spent_nano"] <= row["quota_nano"], dict(row)
    calls: list[Call] = run["on_ceiling"]
    assert set(tally(calls)) <= {"200", "403 insufficient_quota", "503 service_unavailable"}, tally(calls)
    assert tally(calls).get("403 insufficient_quota", 0) > 0, tally(calls)  # its room ran short
    return {"served": sum(c.status == 200 for c in calls), "spent_nano": int(row["spent_nano"]),
            "quota_nano": int(row["quota_nano"])}


async def _held(fleet: Fleet) -> list[str]:
    assert fleet.config_path is not None
    conn = await asyncpg.connect(fleet.config.database)
    try:
        return [r["request_id"] for r in await conn.fetch("SELECT request_id FROM reservations")]
    finally:
        await conn.close()


async def _fleet_through_a_fault(kind: str, pg_cluster: PostgresCluster, chaos_dsn: str,
                                 own_redis: RedisServer, make_config: MakeConfig,
                                 simulator: SimulatorHandle, tmp_path: Path) -> tuple[Fleet, dict[str, Any]]:
    """Two replicas under load through one fault of the database (``_through_a_fault``), the
    database running again and both replicas stopped cleanly at the end."""
    own_redis.start()
    fleet = Fleet(_config(make_config, simulator, chaos_dsn, own_redis), tmp_path)
    await fleet.start()
    try:
        run = await _through_a_fault(fleet, kind, pg_cluster)
    finally:
        pg_cluster.resume()
        if not pg_cluster.running():
            pg_cluster.start()
        codes = await fleet.stop()
    assert codes == [0, 0]
    return fleet, run


def _phases(run: dict[str, Any]) -> dict[str, list[Call]]:
    loaded: list[Call] = run["loaded"]
    began, back = run["began"], run["back"]
    return {"before": [c for c in loaded if c.ended < began],
            "during": [c for c in loaded if began <= c.ended < back],
            "after": [c for c in loaded if c.ended >= back]}


async def test_database_stopped_longer_than_stale_after(
        pg_cluster: PostgresCluster, chaos_dsn: str, own_redis: RedisServer, make_config: MakeConfig,
        simulator: SimulatorHandle, tmp_path: Path) -> None:
    fleet, run = await _fleet_through_a_fault("stop", pg_cluster, chaos_dsn, own_redis, make_config,
                                              simulator, tmp_path)
    phases = _phases(run)
    assert tally(run["streamed"]) == {"200": 6}  # in flight across the outage: answered in full
    assert set(tally(phases["during"])) <= {"200", "503 service_unavailable"}, tally(phases["during"])
    assert tally(phases["during"]).get("503 service_unavailable", 0) > 0
    assert all(c.retry_after for c in phases["during"] if c.status == 503)
    late = [c for c in phases["after"] if c.ended > run["back"] + 1.5]
    assert late and tally(late) == {"200": len(late)}, tally(late)
    calls = [*run["loaded"], *run["streamed"], *run["on_ceiling"]]
    assert not any(c.status >= 500 and c.code != "service_unavailable" for c in calls), tally(calls)
    ceiling = await _check_ceiling(chaos_dsn, run)
    assert await _crash_releases(chaos_dsn) == []  # no replica swept a live one
    money = await check_money(chaos_dsn, run["user"]["id"], BALANCE_USD * 10**9, calls, fleet)
    for replica in (0, 1):
        text = fleet.log_text(replica)
        assert TRACEBACK not in text, text[-3000:]
        assert text.count(DATABASE_DOWN) == 1, text[-3000:]
    print(f"database stopped {OUTAGE_S}s (stale_after_s 2): before {tally(phases['before'])}, "
          f"during {tally(phases['during'])}, after {tally(phases['after'])}, streams across it "
          f"{tally(run['streamed'])}; ceiling key {tally(run['on_ceiling'])} {ceiling}; money {money}")


async def test_database_hung_longer_than_stale_after(
        pg_cluster: PostgresCluster, chaos_dsn: str, own_redis: RedisServer, make_config: MakeConfig,
        simulator: SimulatorHandle, tmp_path: Path) -> None:
    fleet, run = await _fleet_through_a_fault("hang", pg_cluster, chaos_dsn, own_redis, make_config,
                                              simulator, tmp_path)
    phases = _phases(run)
    calls = [*run["loaded"], *run["streamed"]]
    assert tally(run["streamed"]) == {"200": 6}
    # A hung database answers late, not never: calls wait for it (within the connect timeout).
    assert tally(calls) == {"200": len(calls)}, tally(calls)
    ceiling = await _check_ceiling(chaos_dsn, run)
    calls += run["on_ceiling"]
    assert await _crash_releases(chaos_dsn) == []
    money = await check_money(chaos_dsn, run["user"]["id"], BALANCE_USD * 10**9, calls, fleet)
    for replica in (0, 1):
        assert TRACEBACK not in fleet.log_text(replica), fleet.log_text(replica)[-3000:]
    print(f"database hung {OUTAGE_S}s (stale_after_s 2): before {tally(phases['before'])}, "
          f"during {tally(phases['during'])}, after {tally(phases['after'])}, streams across it "
          f"{tally(run['streamed'])}; ceiling key {tally(run['on_ceiling'])} {ceiling}; money {money}")
