"""Two ``gateway serve`` replicas on the test's own PostgreSQL and Redis: Redis unreachable at
start, killed and restarted under load, hung (SIGSTOP) under load.

* Started against an unreachable Redis, the replicas serve, ``/readyz`` names Redis, and
  ``ratelimit.on_redis_error: allow`` serves rate-limited calls unlimited; once Redis is up, a burst
  of 60 calls on an rpm=20 key serves exactly 20, and so again right after a restart under load.
* A hung Redis with ``on_redis_error: deny``: rate-limited calls are refused 503 with
  ``Retry-After`` in milliseconds, not seconds; unlimited keys and admin writes barely notice;
  limits are exact once it resumes.
* Each asserts the money identity (answered = charged = logged, nothing held, ``gateway audit``
  clean), one WARNING per outage and replica, and no stack trace.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest

from gateway.accounts.ratelimit import RETRY_DOWN_S
from tests.chaos.fleet import TRACEBACK, Call, Fleet, burst, call, check_money, keep_calling, tally
from tests.chaos.services import RedisServer

if TYPE_CHECKING:
    from tests.conftest import MakeConfig

pytestmark = pytest.mark.slow  # its own PostgreSQL and Redis: not the machine's services

FAST_METERING = {"heartbeat_s": 0.5, "stale_after_s": 2.0}
QUIET = {"access_log": False, "level": "WARNING"}
REDIS_DOWN = "Redis unavailable"
BALANCE_USD = 10


async def _user_and_key(session: aiohttp.ClientSession, fleet: Fleet) -> tuple[dict[str, Any], str]:
    user = await fleet.admin(session, "POST", "/admin/users", {"name": "chaos", "quota_usd": BALANCE_USD})
    key = (await fleet.admin(session, "POST", "/admin/keys", {"user_id": user["id"], "name": "load"}))["key"]
    return user, key


async def _limited_key(session: aiohttp.ClientSession, fleet: Fleet, user_id: int, rpm: int) -> str:
    body = {"user_id": user_id, "name": f"rpm{rpm}", "rpm": rpm}
    return str((await fleet.admin(session, "POST", "/admin/keys", body))["key"])


async def _redis_back(session: aiohttp.ClientSession, fleet: Fleet) -> None:
    """Once both replicas' readiness sees Redis again (10 s at most), each limiter's next ask after
    an outage is due: then its limits are exact. A loaded machine may take a while for the first."""
    deadline = time.monotonic() + 10.0
    for replica in (0, 1):
        while (await fleet.readyz(session, replica))[0] != 200:
            assert time.monotonic() < deadline, f"replica {replica} does not see Redis again"
            await asyncio.sleep(0.05)
    await asyncio.sleep(RETRY_DOWN_S + 0.2)


def _served(calls: list[Call]) -> int:
    return sum(c.status == 200 for c in calls)


async def test_redis_unreachable_at_start_then_restarted_under_load(
        chaos_dsn: str, own_redis: RedisServer, make_config: MakeConfig, tmp_path: Path) -> None:
    # A stopped Redis refuses connections at once; the command timeout is for a hung one (the next
    # test). Long here, so that a loaded machine's slow command is not taken for an outage (which,
    # with "allow", serves the limited key unlimited).
    config = make_config(database=chaos_dsn, redis=own_redis.url, metering=FAST_METERING, logging=QUIET,
                         ratelimit={"on_redis_error": "allow", "redis_timeout_s": 2.0})
    fleet = Fleet(config, tmp_path)
    await fleet.start()  # Redis not started yet
    calls: list[Call] = []
    figures: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            user, load_key = await _user_and_key(session, fleet)
            # 1. No Redis at all: not ready, and the policy (allow) serves the limited key unlimited.
            for replica in (0, 1):
                assert await fleet.readyz(session, replica) == (
                    503, {"status": "unavailable", "down": ["redis"],
                          "checks": {"database": "ok", "redis": "down"}})
            start_burst = await burst(session, fleet, await _limited_key(session, fleet, user["id"], 10), 30)
            assert tally(start_burst) == {"200": 30}
            # 2. Redis comes up: ready, and the limits are exact at once.
            own_redis.start()
            await _redis_back(session, fleet)
            up_burst = await burst(session, fleet, await _limited_key(session, fleet, user["id"], 20), 60)
            assert tally(up_burst) == {"200": 20, "429 rate_limit_exceeded": 40}
            assert all(c.retry_after for c in up_burst if c.status == 429)
            # 3. Under load (both replicas, streams included), Redis is killed and started again.
            done = asyncio.Event()
            load = asyncio.create_task(keep_calling(session, fleet, load_key, done))
            await asyncio.sleep(1.0)
            own_redis.stop()
            down_burst = await burst(session, fleet, await _limited_key(session, fleet, user["id"], 10), 30)
            assert tally(down_burst) == {"200": 30}  # allow: served, unlimited, while Redis is away
            assert (await fleet.readyz(session, 0))[1]["down"] == ["redis"]
            await asyncio.sleep(1.0)
            own_redis.start()
            await _redis_back(session, fleet)
            after_burst = await burst(session, fleet, await _limited_key(session, fleet, user["id"], 20), 60)
            assert tally(after_burst) == {"200": 20, "429 rate_limit_exceeded": 40}
            await asyncio.sleep(0.5)
            done.set()
            loaded = await load
            assert tally(loaded) == {"200": len(loaded)}, tally(loaded)
            calls = [*start_burst, *up_burst, *down_burst, *after_burst, *loaded]
            figures = {"no redis at start (rpm=10, 30 calls)": tally(start_burst),
                       "redis up (rpm=20, 60 calls)": tally(up_burst),
                       "redis killed (rpm=10, 30 calls)": tally(down_burst),
                       "after restart (rpm=20, 60 calls)": tally(after_burst),
                       "load on an unlimited key throughout": tally(loaded)}
    finally:
        codes = await fleet.stop()
    assert codes == [0, 0]
    money = await check_money(chaos_dsn, user["id"], BALANCE_USD * 10**9, calls, fleet)
    for replica in (0, 1):
        text = fleet.log_text(replica)
        assert TRACEBACK not in text, text[-3000:]
        assert text.count(REDIS_DOWN) == 2, text[-3000:]  # two outages: at start, at the restart
    print(f"redis restart: {figures}; money {money}")


async def test_hung_redis_costs_milliseconds_and_deny_refuses(
        chaos_dsn: str, own_redis: RedisServer, make_config: MakeConfig, tmp_path: Path) -> None:
    own_redis.start()
    config = make_config(database=chaos_dsn, redis=own_redis.url, metering=FAST_METERING, logging=QUIET,
                         ratelimit={"on_redis_error": "deny", "redis_timeout_s": 0.25})
    fleet = Fleet(config, tmp_path)
    await fleet.start()
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            user, load_key = await _user_and_key(session, fleet)
            limited = await _limited_key(session, fleet, user["id"], 1000)
            first = [await call(session, fleet, r, limited) for r in (0, 1)]
            assert tally(first) == {"200": 2}
            done = asyncio.Event()
            load = asyncio.create_task(keep_calling(session, fleet, load_key, done))
            await asyncio.sleep(0.5)
            own_redis.hang()
            hung_at = time.monotonic()
            refused = [await call(session, fleet, i % 2, limited) for i in range(20)]
            assert tally(refused) == {"503 service_unavailable": 20}
            assert all(c.retry_after for c in refused)
            slowest_refusal = max(c.seconds for c in refused)
            assert slowest_refusal < 1.0, slowest_refusal  # the command timeout, not seconds
            began = time.monotonic()
            await fleet.admin(session, "PATCH", f"/admin/users/{user['id']}", {"name": "chaos-renamed"})
            admin_write_s = time.monotonic() - began
            assert admin_write_s < 1.5, admin_write_s
            status, ready = await fleet.readyz(session, 1)
            assert (status, ready["down"]) == (503, ["redis"])
            await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - hung_at)))
            own_redis.resume()
            await _redis_back(session, fleet)
            # One at a time, as the refusals above: this test's 0.25 s command timeout is for the
            # hang, and thirty calls at once on a loaded machine can read a reply later than that.
            after_key = await _limited_key(session, fleet, user["id"], 10)
            after = [await call(session, fleet, i % 2, after_key) for i in range(30)]
            assert tally(after) == {"200": 10, "429 rate_limit_exceeded": 20}
            done.set()
            loaded = await load
    finally:
        codes = await fleet.stop()
    assert codes == [0, 0]
    assert tally(loaded) == {"200": len(loaded)}, tally(loaded)
    during = [c for c in loaded if hung_at + 0.3 < c.ended < hung_at + 2.0]
    slowest_unlimited = max(c.seconds for c in during if not c.stream)
    # Against the same load's slowest call before the hang: a loaded machine slows both alike.
    before = [c.seconds for c in loaded if c.ended < hung_at and not c.stream]
    assert slowest_unlimited < max(before) + 1.0, (slowest_unlimited, max(before))
    calls = [*first, *refused, *after, *loaded]
    money = await check_money(chaos_dsn, user["id"], BALANCE_USD * 10**9, calls, fleet)
    for replica in (0, 1):
        text = fleet.log_text(replica)
        assert TRACEBACK not in text, text[-3000:]
        assert text.count(REDIS_DOWN) == 1, text[-3000:]
    print(f"hung redis (deny): limited key {tally(refused)}, "
          f"slowest refusal {slowest_refusal * 1000:.0f} ms, admin write {admin_write_s * 1000:.0f} ms, "
          f"unlimited key during the hang {tally(during)} "
          f"(slowest {slowest_unlimited * 1000:.0f} ms); after resume (rpm=10, 30 calls) {tally(after)}; "
          f"money {money}")
