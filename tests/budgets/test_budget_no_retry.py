"""A budget refusal whose ``Retry-After`` is past the SDKs' retry horizon says
``x-should-retry: false`` (docs/money.md): the openai SDK, left at its default retries, sends the
request once and raises at once instead of sleeping until the period's end and asking again."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx
import openai
import pytest

from gateway.accounts.ratelimit_headers import SDK_RETRY_HORIZON_S

from .conftest import BudgetClock
from .helpers import CALL_USD, flat_call

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle


async def _refused_once(gw: GatewayHandle, key: str) -> tuple[httpx.Headers, int, float]:
    """The refusal's headers, how many requests the SDK sent (default retries) and how long it took."""
    sent: list[httpx.Request] = []

    async def count(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [count]}) as http, openai.AsyncOpenAI(
            base_url=gw.base_url + "/v1", api_key=key, http_client=http) as client:
        started = time.monotonic()
        with pytest.raises(openai.RateLimitError) as refused:
            await flat_call(client)
        return refused.value.response.headers, len(sent), time.monotonic() - started


async def test_a_long_retry_after_tells_the_sdk_not_to_retry(flat_gw: GatewayHandle,
                                                             budget_clock: BudgetClock) -> None:
    gw = flat_gw
    budget_clock.now -= 30  # the day ends in 90 s: a wait the openai SDK would otherwise sleep through
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], budget_usd=CALL_USD, budget_period="day")
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key["key"], max_retries=0) as client:
        await flat_call(client)  # the whole budget
    headers, sent, took = await _refused_once(gw, key["key"])
    assert headers["retry-after"] == "90" and headers["x-should-retry"] == "false"
    assert sent == 1 and took < 5
    await gw.gateway.meter.flush()
    rows = (await gw.admin("GET", f"/admin/logs?status=429&key_id={key['id']}")).json()["data"]
    assert [r["error_code"] for r in rows] == ["budget_exceeded"]  # exactly one request reached it


async def test_a_wait_within_the_horizon_leaves_the_sdk_to_decide(flat_gw: GatewayHandle,
                                                                  budget_clock: BudgetClock) -> None:
    gw = flat_gw  # the day ends in 60 s (the clock's default): the SDK may wait and retry
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], budget_usd=CALL_USD, budget_period="day")
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key["key"], max_retries=0) as client:
        await flat_call(client)
        with pytest.raises(openai.RateLimitError) as refused:
            await flat_call(client)
    headers = refused.value.response.headers
    assert headers["retry-after"] == str(SDK_RETRY_HORIZON_S) and "x-should-retry" not in headers
