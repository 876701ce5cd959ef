"""100 concurrent calls against a quota that covers exactly 10 worst cases: nothing is overspent.

``sim-flat`` has a free input and 1.5 USD per million output tokens, so the worst case of a call
with ``max_tokens = 1000`` is exactly 1000 x 1,500 = 1,500,000 nano-USD whatever the gateway's input
estimate, and the prompt asks the simulator for exactly 1000 output tokens: every served call costs
its whole reservation. So after any call is served, no further one fits, and at most 10 succeed in
whatever order the calls are admitted and finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import Counter
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
import pytest

from gateway.accounts.metering.audit import run_audit

from .helpers import OUT_NANO, fault_config, new_account

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

CALLS = 100
FITS = 10
MAX_TOKENS = 1000
WORST_CASE_NANO = MAX_TOKENS * OUT_NANO  # 1,500,000 nano-USD = 0.0015 USD
QUOTA_USD = 0.015  # exactly FITS worst cases
assert round(QUOTA_USD * 10**9) == FITS * WORST_CASE_NANO


async def _burst(gw: GatewayHandle, key: str, marker: str) -> list[tuple[int, Any]]:
    body = orjson.dumps({"model": "sim-flat", "max_tokens": MAX_TOKENS, "messages": [
        {"role": "user", "content": f"sim:tokens={MAX_TOKENS} burst {marker}"}]})
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = asyncio.Event()

        async def one() -> tuple[int, Any]:
            await start.wait()
            async with session.post(gw.base_url + "/v1/chat/completions", data=body, headers=headers) as resp:
                return resp.status, orjson.loads(await resp.read())

        tasks = [asyncio.create_task(one()) for _ in range(CALLS)]
        start.set()
        return await asyncio.gather(*tasks)


async def _watch_balance(gw: GatewayHandle, user_id: int, key_id: int, seen: list[tuple[int, int]]) -> None:
    """Sample the stored balance and the key's committed spending while the burst runs."""
    storage = gw.gateway.storage
    while True:
        user = await storage.get_user(user_id)
        key = await storage.get_key(key_id)
        assert user is not None and key is not None
        seen.append((user.balance_nano, key.spent_nano + key.reserved_nano))
        await asyncio.sleep(0.005)


async def _run(gw: GatewayHandle, simulator_url: str, *, limit_on: str) -> None:
    if limit_on == "key":  # rich user, key ceiling of 10 worst cases
        account = await new_account(gw, balance_usd=100, quota_usd=QUOTA_USD)
    else:  # no ceiling on the key, the user's balance is 10 worst cases
        account = await new_account(gw, balance_usd=QUOTA_USD)
    user_id, key_id = account.user["id"], account.key_record["id"]
    marker = secrets.token_hex(8)
    samples: list[tuple[int, int]] = []
    watcher = asyncio.create_task(_watch_balance(gw, user_id, key_id, samples))
    try:
        results = await _burst(gw, account.key, marker)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    await gw.gateway.meter.flush()

    statuses = Counter(status for status, _ in results)
    assert set(statuses) <= {200, 403}, statuses
    assert statuses[200] <= FITS, statuses
    # Every admitted call costs its whole reservation, so the quota is used up exactly: no fewer
    # calls succeed either (nothing leaked or double-held).
    assert statuses[200] == FITS, statuses
    for status, body in results:
        if status == 403:
            assert body["error"]["code"] == "insufficient_quota"
        else:
            assert body["usage"]["completion_tokens"] == MAX_TOKENS

    storage = gw.gateway.storage
    user = await storage.get_user(user_id)
    key = await storage.get_key(key_id)
    assert user is not None and key is not None
    quota_nano = FITS * WORST_CASE_NANO
    assert key.spent_nano == statuses[200] * WORST_CASE_NANO <= quota_nano
    assert key.reserved_nano == 0
    assert user.balance_nano >= 0
    assert user.used_nano == key.spent_nano
    assert samples and all(balance >= 0 for balance, _ in samples)
    if limit_on == "key":
        assert all(held <= quota_nano for _, held in samples)
    assert await run_audit(storage) == []
    # The refused calls never reached an upstream.
    async with aiohttp.ClientSession() as session, session.get(simulator_url + "/_sim/requests") as resp:
        sim_log = await resp.json()
    reached = [r for r in sim_log if marker in orjson.dumps(r.get("body_json_or_null")).decode()]
    assert len(reached) == statuses[200]


@pytest.mark.parametrize("limit_on", ["key", "user"])
async def test_burst_never_overspends_sqlite(gateway_server: StartGateway, make_config: MakeConfig,
                                             simulator: Any, limit_on: str) -> None:
    gw = await gateway_server(fault_config(make_config, simulator.base_url))
    await _run(gw, simulator.base_url, limit_on=limit_on)


@pytest.mark.postgres
@pytest.mark.parametrize("limit_on", ["key", "user"])
async def test_burst_never_overspends_postgres(gateway_server: StartGateway, make_config: MakeConfig,
                                               simulator: Any, fresh_pg_database: str, limit_on: str) -> None:
    gw = await gateway_server(fault_config(make_config, simulator.base_url, database=fresh_pg_database))
    try:
        await _run(gw, simulator.base_url, limit_on=limit_on)
    finally:
        await gw.stop()  # before the database is dropped
