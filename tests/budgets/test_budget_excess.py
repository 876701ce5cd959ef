"""A call charged more than its hold (its upstream reported more than the worst case) takes the
excess only as far as the budgets still allow in the period, like the balance and the key's
ceiling: the period's spend ends at the budget exactly, the rest is recorded as uncharged, and the
next call is refused 429 ``budget_exceeded``. The ``inflate-chat`` model of the money tests
reports 40 times the tokens it used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai
import pytest

from gateway.accounts.metering.audit import run_audit
from tests.money.helpers import IN_NANO, OUT_NANO
from tests.money.test_actual_cost import inflated_config

from .conftest import BudgetClock
from .helpers import openai_client

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

BUDGET_NANO = 200_000  # above the call's worst case, below what the inflated usage costs


@pytest.mark.parametrize("on", ["key", "user"])
async def test_an_excess_is_charged_only_up_to_the_budget(
        gateway_server: StartGateway, make_config: MakeConfig, simulator: Any,
        budget_clock: BudgetClock, on: str) -> None:
    gw: GatewayHandle = await gateway_server(inflated_config(make_config, simulator.base_url))
    budget = {"budget_usd": BUDGET_NANO / 1e9, "budget_period": "week"}
    reply = await gw.admin("POST", "/admin/users", {"name": f"excess-{on}", "quota_usd": 100,
                                                    **(budget if on == "user" else {})})
    user = reply.json()
    key = await gw.create_key(user["id"], **(budget if on == "key" else {}))
    async with openai_client(gw, key["key"]) as client:
        out = await client.chat.completions.create(
            model="inflate-chat", max_tokens=20,
            messages=[{"role": "user", "content": "sim:tokens=10 hello"}])
        assert out.usage is not None
        cost = out.usage.prompt_tokens * IN_NANO + out.usage.completion_tokens * OUT_NANO
        assert cost > BUDGET_NANO
        # Settled (the excess is taken at settlement; until then the next call sees only the hold).
        await gw.gateway.meter.flush()
        with pytest.raises(openai.RateLimitError) as refused:
            await client.chat.completions.create(
                model="inflate-chat", max_tokens=20, messages=[{"role": "user", "content": "again"}])
    assert refused.value.code == "budget_exceeded"
    await gw.gateway.meter.flush()
    storage = gw.gateway.storage
    row = await _served_row(gw, key["id"])
    assert (row["charge_nano"], row["uncharged_nano"]) == (BUDGET_NANO, cost - BUDGET_NANO)
    record = await storage.get_user(user["id"]) if on == "user" else await storage.get_key(key["id"])
    assert record is not None and record.budget_spent_nano == BUDGET_NANO
    stored_user = await storage.get_user(user["id"])
    assert stored_user is not None and stored_user.used_nano == BUDGET_NANO
    assert await run_audit(storage) == []


async def _served_row(gw: GatewayHandle, key_id: int) -> dict[str, Any]:
    rows = (await gw.admin("GET", f"/admin/logs?key_id={key_id}&status=200")).json()["data"]
    assert len(rows) == 1, rows
    row: dict[str, Any] = rows[0]
    return row
