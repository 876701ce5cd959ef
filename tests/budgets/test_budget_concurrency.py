"""50 concurrent calls against a budget that covers exactly 10 of them: exactly 10 are served and
the period's budget is never overshot, on one gateway on SQLite and on two replicas sharing
PostgreSQL and Redis, for a key's budget and for a user's (spread over two keys).

Every ``sim-flat`` call here costs exactly its worst case (``helpers.CALL_NANO``), and its upstream
answers after 100 ms, so the calls overlap: once ten are held or served, none fits, whatever the
order. The budget is the only limit (balances and keys are otherwise unbounded), so every other
call is a 429 ``budget_exceeded``, made through the openai SDK, which never reached the upstream.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from typing import TYPE_CHECKING, Any

import openai
import pytest

from gateway.accounts.metering.audit import run_audit
from tests.money.helpers import fault_config
from tests.replicas.test_replicas import REDIS_URL, require_redis

from .conftest import BudgetClock
from .helpers import CALL_NANO, CALL_USD, flat_call, openai_client, shown_key, shown_user

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

CALLS = 50
FITS = 10
BURST_TIMEOUT_S = 60.0


async def _burst(clients: list[openai.AsyncOpenAI]) -> Counter[str]:
    """``CALLS`` calls at once, spread over ``clients``: how many ended how."""
    go = asyncio.Event()

    async def one(client: openai.AsyncOpenAI) -> str:
        await go.wait()
        try:
            await flat_call(client, "burst")
        except openai.RateLimitError as exc:
            assert exc.response.headers["retry-after"] == "60", exc.response.headers  # FRIDAY_2359
            return str(exc.code)
        return "served"

    tasks = [asyncio.create_task(one(clients[i % len(clients)])) for i in range(CALLS)]
    go.set()
    async with asyncio.timeout(BURST_TIMEOUT_S):
        return Counter(await asyncio.gather(*tasks))


async def _setup(gateways: list[GatewayHandle], on: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A user and keys (one per gateway when the budget is the user's, else one shared key) with a
    daily budget of ``FITS`` calls on ``on``."""
    budget = {"budget_usd": FITS * CALL_USD, "budget_period": "day"}
    first = gateways[0]
    reply = await first.admin("POST", "/admin/users", {"name": f"b-{secrets.token_hex(4)}", "quota_usd": 100,
                                                       **(budget if on == "user" else {})})
    assert reply.status == 201, reply.text
    user = reply.json()
    if on == "key":
        key = await first.create_key(user["id"], **budget)
        return user, [key] * len(gateways)
    return user, [await first.create_key(user["id"]) for _ in gateways]


async def _check_books(gateways: list[GatewayHandle], user: dict[str, Any], keys: list[dict[str, Any]],
                       on: str, outcomes: Counter[str]) -> None:
    assert outcomes == Counter({"served": FITS, "budget_exceeded": CALLS - FITS}), outcomes
    for gw in gateways:
        await gw.gateway.meter.flush()
    first = gateways[0]
    spent = (await shown_user(first, user["id"]) if on == "user" else await shown_key(first, keys[0]["id"]))
    assert spent["budget_spent_usd"] == pytest.approx(FITS * CALL_USD)
    stored = await first.gateway.storage.get_user(user["id"])
    assert stored is not None and stored.used_nano == FITS * CALL_NANO and stored.reserved_nano == 0
    budget_nano = FITS * CALL_NANO
    record = stored if on == "user" else await first.gateway.storage.get_key(keys[0]["id"])
    assert record is not None and record.budget_spent_nano == budget_nano  # exactly, never above
    assert await run_audit(first.gateway.storage) == []


@pytest.mark.parametrize("on", ["key", "user"])
async def test_fifty_calls_never_overshoot_a_budget_on_sqlite(
        gateway_server: StartGateway, make_config: MakeConfig, simulator: Any,
        budget_clock: BudgetClock, on: str) -> None:
    gw = await gateway_server(fault_config(make_config, simulator.base_url))
    user, keys = await _setup([gw], on)
    async with openai_client(gw, keys[0]["key"]) as client:
        outcomes = await _burst([client])
    await _check_books([gw], user, keys, on, outcomes)


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.parametrize("on", ["key", "user"])
async def test_fifty_calls_never_overshoot_a_budget_across_two_replicas(
        pg_dsn: str, gateway_server: StartGateway, make_config: MakeConfig, simulator: Any,
        budget_clock: BudgetClock, on: str) -> None:
    await require_redis()
    config = fault_config(make_config, simulator.base_url, database=pg_dsn, redis=REDIS_URL)
    a = await gateway_server(config)
    b = await gateway_server(config)
    try:
        user, keys = await _setup([a, b], on)
        async with openai_client(a, keys[0]["key"]) as on_a, openai_client(b, keys[1]["key"]) as on_b:
            outcomes = await _burst([on_a, on_b])
        await _check_books([a, b], user, keys, on, outcomes)
    finally:
        await a.stop()  # before the database is dropped
        await b.stop()
