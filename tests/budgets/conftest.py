"""Fixtures of the budget tests (issue 36 point 3): the budgets' clock, turned by the test through
the documented seam (``gateway.accounts.budget_periods.clock``) instead of sleeping, a gateway
with the money tests' flat-priced model, and a PostgreSQL database of the test's own."""

from __future__ import annotations

import calendar
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from gateway.accounts import budget_periods
from gateway.storage.testing import fresh_database
from tests.money.helpers import fault_config

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

# Friday 27 November 2026, one minute before midnight UTC: the day ends in 60 s, the week on Monday
# 30 November (2 days and 60 s), the month on 1 December (3 days and 60 s).
FRIDAY_2359 = calendar.timegm((2026, 11, 27, 23, 59, 0))
UNTIL_END = {"day": 60, "week": 2 * 86_400 + 60, "month": 3 * 86_400 + 60}


class BudgetClock:
    """The budgets' "now", set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def budget_clock(monkeypatch: pytest.MonkeyPatch) -> BudgetClock:
    clock = BudgetClock(FRIDAY_2359)
    monkeypatch.setattr(budget_periods, "clock", clock)
    return clock


@pytest_asyncio.fixture
async def flat_gw(gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> GatewayHandle:
    """A gateway with ``sim-flat`` (output 1.5 USD per million tokens, input free: a call with
    ``max_tokens`` N asking the simulator for N tokens costs exactly its worst case)."""
    return await gateway_server(fault_config(make_config, simulator.base_url))


@pytest_asyncio.fixture
async def pg_dsn() -> AsyncIterator[str]:
    """A fresh PostgreSQL database, dropped after the test (skipped without a server unless CI=true)."""
    async for dsn in fresh_database("gw_budgets"):
        yield dsn
