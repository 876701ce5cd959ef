"""A call whose worst case does not fit the period's remaining budget is refused before any
upstream call: 429 ``budget_exceeded`` in the family's envelope (openai, anthropic and google-genai
SDKs) with ``Retry-After`` until the period ends, and a request-log row. The period's count starts
again at the period's start by the clock alone (the test turns the budgets' clock, no job runs)."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import aiohttp
import anthropic
import openai
import orjson
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from gateway.accounts.metering.audit import run_audit
from gateway.accounts.records import Principal
from gateway.storage.rows import Settlement

from .conftest import UNTIL_END, BudgetClock
from .helpers import (
    CALL_NANO,
    CALL_USD,
    MAX_TOKENS,
    flat_call,
    flat_messages,
    openai_client,
    shown_key,
    shown_user,
)

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]  # google-genai


async def _reached(simulator_url: str, marker: str) -> int:
    """How many requests carrying ``marker`` the simulator received."""
    async with aiohttp.ClientSession() as session, session.get(simulator_url + "/_sim/requests") as resp:
        log = await resp.json()
    return sum(marker in orjson.dumps(r.get("body_json_or_null")).decode() for r in log)


@pytest.mark.parametrize("period", ["day", "week", "month"])
async def test_over_budget_is_429_in_every_family_with_retry_after_to_the_period_end(
        flat_gw: GatewayHandle, budget_clock: BudgetClock, simulator: Any, period: str) -> None:
    gw = flat_gw
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], budget_usd=CALL_USD, budget_period=period)  # one call's worth
    marker = secrets.token_hex(6)
    wait = str(UNTIL_END[period])
    async with openai_client(gw, key["key"]) as client:
        await flat_call(client, marker)  # the whole budget
        with pytest.raises(openai.RateLimitError) as refused:
            await flat_call(client, marker)
    assert refused.value.code == "budget_exceeded"
    assert refused.value.response.headers["retry-after"] == wait
    adjective = {"day": "daily", "week": "weekly", "month": "monthly"}[period]
    assert f"API key's {adjective} budget" in refused.value.message, refused.value.message

    async with anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=key["key"], max_retries=0) as client:
        with pytest.raises(anthropic.RateLimitError) as caught:
            await client.messages.create(model="sim-flat", max_tokens=MAX_TOKENS,
                                         messages=flat_messages(marker))
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error", body
    assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "budget_exceeded"
    assert caught.value.response.headers["retry-after"] == wait

    sdk = genai.Client(api_key=key["key"], http_options=types.HttpOptions(base_url=gw.base_url,
                                                                         api_version="v1beta"))
    try:
        with pytest.raises(genai_errors.ClientError) as gcaught:
            await sdk.aio.models.generate_content(
                model="sim-flat", contents=f"budget {marker}",
                config=types.GenerateContentConfig(max_output_tokens=MAX_TOKENS))
    finally:
        await sdk.aio.aclose()
    assert gcaught.value.code == 429 and gcaught.value.status == "RESOURCE_EXHAUSTED"
    assert gcaught.value.details["error"]["details"][0]["reason"] == "budget_exceeded"

    assert await _reached(simulator.base_url, marker) == 1  # the refusals never left the gateway
    await gw.gateway.meter.flush()
    rows = (await gw.admin("GET", f"/admin/logs?status=429&key_id={key['id']}")).json()["data"]
    assert len(rows) == 3 and {r["error_code"] for r in rows} == {"budget_exceeded"}
    shown = await shown_key(gw, key["id"])
    assert shown["budget_spent_usd"] == shown["spent_usd"] == pytest.approx(CALL_USD)


async def test_the_period_ends_on_time_by_the_clock_alone(flat_gw: GatewayHandle,
                                                          budget_clock: BudgetClock) -> None:
    gw = flat_gw
    budget_clock.now += 59.5  # half a second before midnight
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], budget_usd=2 * CALL_USD, budget_period="day")
    async with openai_client(gw, key["key"]) as client:
        await flat_call(client)
        await flat_call(client)
        with pytest.raises(openai.RateLimitError) as refused:
            await flat_call(client)
        assert refused.value.response.headers["retry-after"] == "1"  # rounded up, at least 1
        await gw.gateway.meter.flush()  # both settled before midnight (a later one counts after it)
        budget_clock.now += 1.0  # the next day: nothing ran at midnight
        await flat_call(client)
        shown = await shown_key(gw, key["id"])
        assert shown["budget_spent_usd"] == pytest.approx(CALL_USD)  # this day's only
        assert shown["spent_usd"] == pytest.approx(3 * CALL_USD)
        await flat_call(client)
        with pytest.raises(openai.RateLimitError):
            await flat_call(client)
    await gw.gateway.meter.flush()
    assert await run_audit(gw.gateway.storage) == []


async def test_a_user_budget_spans_all_its_keys(flat_gw: GatewayHandle, budget_clock: BudgetClock) -> None:
    gw = flat_gw
    reply = await gw.admin("POST", "/admin/users", {"name": "one-budget", "quota_usd": 10,
                                                    "budget_usd": CALL_USD, "budget_period": "month"})
    user = reply.json()
    first = await gw.create_key(user["id"])
    second = await gw.create_key(user["id"])
    async with openai_client(gw, first["key"]) as client:
        await flat_call(client)
    async with openai_client(gw, second["key"]) as client:
        with pytest.raises(openai.RateLimitError) as refused:
            await flat_call(client)
    assert refused.value.code == "budget_exceeded" and "account's monthly budget" in refused.value.message
    assert refused.value.response.headers["retry-after"] == str(UNTIL_END["month"])
    assert (await shown_user(gw, user["id"]))["budget_spent_usd"] == pytest.approx(CALL_USD)


async def test_a_short_balance_stays_insufficient_quota(flat_gw: GatewayHandle,
                                                        budget_clock: BudgetClock) -> None:
    """Waiting for the period would not help a balance that cannot pay: that refusal stays a 403."""
    gw = flat_gw
    user = await gw.create_user(quota_usd=CALL_USD / 2)
    key = await gw.create_key(user["id"], budget_usd=CALL_USD / 2, budget_period="day")
    async with openai_client(gw, key["key"]) as client:
        with pytest.raises(openai.PermissionDeniedError) as refused:
            await flat_call(client)
    assert refused.value.code == "insufficient_quota"


async def test_a_hold_across_midnight_counts_in_the_period_it_is_settled_in(
        flat_gw: GatewayHandle, budget_clock: BudgetClock) -> None:
    """A call held before midnight and settled after counts in the new day; while it was held, its
    hold took room in both (so no period is overshot by calls straddling the boundary)."""
    gw = flat_gw
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], budget_usd=CALL_USD, budget_period="day")
    storage = gw.gateway.storage
    record = await storage.get_key(key["id"])
    owner = await storage.get_user(user["id"])
    assert record is not None and owner is not None
    # A hold made through the meter, as a call's is (a call itself would end within the same second).
    hold = await gw.gateway.meter.reserve(
        "req_straddle", Principal(key=record, user=owner, client_ip="127.0.0.1"), CALL_NANO)
    budget_clock.now += 120  # the next day
    async with openai_client(gw, key["key"]) as client:
        with pytest.raises(openai.RateLimitError):  # the open hold fills the new day's budget too
            await flat_call(client)
    await storage.settle_many([Settlement(hold, CALL_NANO)])
    shown = await shown_key(gw, key["id"])
    assert shown["budget_spent_usd"] == pytest.approx(CALL_USD)
    assert await run_audit(storage) == []
