"""The account endpoints over HTTP: credentials, subscription, usage in cents, user and log views."""

from __future__ import annotations

import datetime
import time
from typing import TYPE_CHECKING, Any

import pytest

from .helpers import IN_NANO, OUT_NANO, Account, new_account

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

RMB_PER_USD = 7.2


def _today() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def _error(reply: Any) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"error"}, body
    return body["error"]


# --- credentials -----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api/user/self", "/api/log/self"])
async def test_api_key_on_management_endpoint_is_invalid_api_key(gw: GatewayHandle, path: str) -> None:
    reply = await gw.request("GET", path, key=gw.key)
    assert reply.status == 401
    err = _error(reply)
    assert err["code"] == "invalid_api_key"
    assert err["type"] == "authentication_error"
    assert reply.headers["X-Service-Request-Id"].startswith("req_")


@pytest.mark.parametrize("path", ["/api/user/self", "/api/log/self", "/v1/dashboard/billing/subscription",
                                  "/v1/dashboard/billing/usage"])
async def test_account_endpoints_without_credential(gw: GatewayHandle, path: str) -> None:
    reply = await gw.request("GET", path)
    assert reply.status == 401
    assert _error(reply)["code"] == "invalid_api_key"


async def test_user_token_on_model_endpoint_is_invalid_api_key(gw: GatewayHandle) -> None:
    body = {"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}]}
    reply = await gw.request("POST", "/v1/chat/completions", json=body, key=gw.user_token)
    assert reply.status == 401
    assert _error(reply)["code"] == "invalid_api_key"


@pytest.mark.parametrize("path", ["/v1/dashboard/billing/subscription", "/v1/dashboard/billing/usage"])
async def test_user_token_on_billing_endpoint_is_invalid_api_key(gw: GatewayHandle, path: str) -> None:
    reply = await gw.request("GET", path, key=gw.user_token,
                             params={"start_date": "2024-01-01", "end_date": "2024-01-02"})
    assert reply.status == 401
    assert _error(reply)["code"] == "invalid_api_key"


# --- subscription ----------------------------------------------------------------------------------

async def test_subscription_of_key_with_ceiling(gw: GatewayHandle) -> None:
    expires = int(time.time()) + 86_400
    key = await gw.create_key(gw.user["id"], name="capped", quota_usd=2.5, expires_at=expires)
    reply = await gw.request("GET", "/v1/dashboard/billing/subscription", key=key["key"])
    assert reply.status == 200, reply.text
    assert reply.json() == {
        "object": "billing_subscription", "has_payment_method": False,
        "soft_limit_usd": 2.5, "hard_limit_usd": 2.5, "system_hard_limit_usd": 2.5,
        "access_until": expires, "plan": {"title": "default", "id": "default"},
    }


async def test_subscription_of_key_without_ceiling_is_the_users_total(gw: GatewayHandle) -> None:
    reply = await gw.request("GET", "/v1/dashboard/billing/subscription", key=gw.key)
    assert reply.status == 200, reply.text
    body = reply.json()
    assert body["hard_limit_usd"] == body["soft_limit_usd"] == body["system_hard_limit_usd"] == 100.0
    assert body["access_until"] == 0
    # Spending moves money from the balance to "used": the total stays what was topped up.
    chat = {"model": "sim-chat", "messages": [{"role": "user", "content": "sim:tokens=30 hello"}]}
    assert (await gw.request("POST", "/v1/chat/completions", json=chat, key=gw.key)).status == 200
    await gw.gateway.meter.flush()
    user = await gw.gateway.storage.get_user(gw.user["id"])
    assert user is not None and user.used_nano > 0
    reply = await gw.request("GET", "/v1/dashboard/billing/subscription", key=gw.key)
    assert reply.json()["hard_limit_usd"] == 100.0
    # A top-up shows at once (read from storage, not from the authentication cache).
    await gw.admin("POST", f"/admin/users/{gw.user['id']}/topup", {"amount_usd": 25})
    reply = await gw.request("GET", "/v1/dashboard/billing/subscription", key=gw.key)
    assert reply.json()["hard_limit_usd"] == 125.0


async def test_subscription_plan_is_the_group(gateway_server: StartGateway, make_config: MakeConfig) -> None:
    gw = await gateway_server(make_config(groups={"default": {"ratio": 1}, "vip": {"ratio": 0.5}}))
    account = await new_account(gw, balance_usd=3, group="vip")
    reply = await gw.request("GET", "/v1/dashboard/billing/subscription", key=account.key)
    assert reply.json()["plan"] == {"title": "vip", "id": "vip"}
    assert reply.json()["hard_limit_usd"] == 3.0


async def test_patched_ceiling_shows_at_once(gw: GatewayHandle) -> None:
    key_id = gw.key_record["id"]
    assert (await gw.admin("PATCH", f"/admin/keys/{key_id}", {"quota_usd": 0.75})).status == 200
    reply = await gw.request("GET", "/v1/dashboard/billing/subscription", key=gw.key)
    assert reply.json()["hard_limit_usd"] == 0.75


# --- usage -----------------------------------------------------------------------------------------

async def _usage(account: Account, start: datetime.date, end: datetime.date) -> dict[str, Any]:
    await account.gw.gateway.meter.flush()
    reply = await account.gw.request("GET", "/v1/dashboard/billing/usage", key=account.key,
                                     params={"start_date": start.isoformat(), "end_date": end.isoformat()})
    assert reply.status == 200, reply.text
    return reply.json()


async def test_usage_totals_in_cents(gw: GatewayHandle) -> None:
    account = Account(gw, gw.user, gw.key_record)
    today = _today()
    expected_nano = 0
    for tokens in (10, 25, 40):
        reply = await account.chat("sim-chat", f"sim:tokens={tokens} count for me")
        assert reply.status == 200, reply.text
        usage = reply.json()["usage"]
        assert usage["completion_tokens"] == tokens
        expected_nano += usage["prompt_tokens"] * IN_NANO + tokens * OUT_NANO
    # Another key of the same user is not counted.
    other = await gw.create_key(gw.user["id"], name="other")
    body = {"model": "sim-chat", "messages": [{"role": "user", "content": "sim:tokens=50 other key"}]}
    assert (await gw.request("POST", "/v1/chat/completions", json=body, key=other["key"])).status == 200
    await gw.gateway.meter.flush()
    if _today() != today:
        pytest.skip("the calls straddled midnight UTC")

    usage = await _usage(account, today - datetime.timedelta(days=2), today + datetime.timedelta(days=1))
    assert usage["object"] == "list"
    assert usage["total_usage"] == expected_nano / 10**7  # USD x 100
    days = usage["daily_costs"]
    assert len(days) == 3  # every day of the range, days without costs included
    midnight = datetime.datetime(today.year, today.month, today.day, tzinfo=datetime.UTC)
    assert [d["timestamp"] for d in days] == [int(midnight.timestamp()) - 2 * 86_400,
                                               int(midnight.timestamp()) - 86_400, int(midnight.timestamp())]
    assert days[0]["line_items"] == days[1]["line_items"] == []
    assert days[2]["line_items"] == [{"name": "sim-chat", "cost": expected_nano / 10**7}]
    # The usage matches what the key was charged.
    key = await gw.gateway.storage.get_key(gw.key_record["id"])
    assert key is not None and key.spent_nano == expected_nano

    # end_date is exclusive: a range that ends today holds none of today's costs.
    usage = await _usage(account, today - datetime.timedelta(days=1), today)
    assert usage["total_usage"] == 0
    assert usage["daily_costs"] == [{"timestamp": int(midnight.timestamp()) - 86_400, "line_items": []}]


async def test_usage_cost_applies_the_group_ratio(gateway_server: StartGateway,
                                                  make_config: MakeConfig) -> None:
    gw = await gateway_server(make_config(groups={"default": {"ratio": 1}, "half": {"ratio": 0.5}}))
    account = await new_account(gw, group="half")
    reply = await account.chat("sim-chat", "sim:tokens=40 half price")
    usage = reply.json()["usage"]
    full = usage["prompt_tokens"] * IN_NANO + 40 * OUT_NANO
    today = _today()
    body = await _usage(account, today, today + datetime.timedelta(days=1))
    assert body["total_usage"] == -(-full // 2) / 10**7


@pytest.mark.parametrize(("params", "param"), [
    ({"end_date": "2024-01-02"}, "start_date"),
    ({"start_date": "2024-01-01"}, "end_date"),
    ({}, "start_date"),
    ({"start_date": "01/01/2024", "end_date": "2024-01-02"}, "start_date"),
    ({"start_date": "2024-01-01", "end_date": "2024-13-01"}, "end_date"),
    ({"start_date": "2024-01-01", "end_date": "2024-01-02T00:00:00Z"}, "end_date"),
    ({"start_date": "2024-02-01", "end_date": "2024-01-01"}, "end_date"),
    ({"start_date": "2024-01-01", "end_date": "2024-01-01"}, "end_date"),
    ({"start_date": "2024-01-01", "end_date": "2024-04-11"}, "end_date"),  # 101 days
])
async def test_usage_date_validation(gw: GatewayHandle, params: dict[str, str], param: str) -> None:
    reply = await gw.request("GET", "/v1/dashboard/billing/usage", key=gw.key, params=params)
    assert reply.status == 400, reply.text
    err = _error(reply)
    assert err["code"] == "invalid_request"
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param
    assert param in err["message"]


async def test_usage_span_of_exactly_100_days(gw: GatewayHandle) -> None:
    reply = await gw.request("GET", "/v1/dashboard/billing/usage", key=gw.key,
                             params={"start_date": "2024-01-01", "end_date": "2024-04-10"})
    assert reply.status == 200, reply.text
    body = reply.json()
    assert len(body["daily_costs"]) == 100
    assert body["total_usage"] == 0


# --- /api/user/self and /api/log/self ----------------------------------------------------------------

async def test_user_self_in_rmb(gw: GatewayHandle) -> None:
    account = Account(gw, gw.user, gw.key_record)
    me = await account.me()
    assert me == {"id": gw.user["id"], "username": "u", "group": "default", "quota": 720.0,
                  "used_quota": 0.0, "request_count": 0,
                  "budget_usd": None, "budget_period": None, "budget_spent_usd": None}  # CONTRACT 7
    charged = 0
    for tokens in (100, 300):
        reply = await account.chat("sim-chat", f"sim:tokens={tokens} money please")
        charged += reply.json()["usage"]["prompt_tokens"] * IN_NANO + tokens * OUT_NANO
    me = await account.me()
    assert me["request_count"] == 2
    assert me["used_quota"] == round(charged * RMB_PER_USD / 10**9, 6)
    assert me["quota"] == round((100 * 10**9 - charged) * RMB_PER_USD / 10**9, 6)


async def test_user_self_envelope(gw: GatewayHandle) -> None:
    reply = await gw.request("GET", "/api/user/self", key=gw.user_token)
    assert reply.status == 200
    body = reply.json()
    assert body["success"] is True and body["message"] == ""
    assert set(body["data"]) == {"id", "username", "group", "quota", "used_quota", "request_count",
                                 "budget_usd", "budget_period", "budget_spent_usd"}  # CONTRACT 7


async def test_log_self_items_and_pagination(gw: GatewayHandle) -> None:
    account = Account(gw, gw.user, gw.key_record)
    request_ids = []
    for n in range(5):
        reply = await account.chat("sim-chat", f"sim:tokens={10 + n} page me", max_tokens=100)
        assert reply.status == 200
        request_ids.append(reply.headers["X-Service-Request-Id"])
    await gw.gateway.meter.flush()
    seen = []
    for page, size in ((1, 2), (2, 2), (3, 2)):
        reply = await gw.request("GET", "/api/log/self", key=gw.user_token,
                                 params={"page": str(page), "page_size": str(size)})
        assert reply.status == 200, reply.text
        body = reply.json()
        assert body["success"] is True and body["message"] == ""
        data = body["data"]
        assert data["total"] == 5 and data["page"] == page and data["page_size"] == size
        seen += [item["request_id"] for item in data["items"]]
    assert seen == request_ids[::-1]  # newest first, no overlap, nothing missing
    empty = (await gw.request("GET", "/api/log/self", key=gw.user_token, params={"page": "4",
                                                                                    "page_size": "2"})).json()
    assert empty["data"]["items"] == [] and empty["data"]["total"] == 5

    defaults = (await gw.request("GET", "/api/log/self", key=gw.user_token)).json()["data"]
    assert defaults["page"] == 1 and defaults["page_size"] == 20 and len(defaults["items"]) == 5
    item = defaults["items"][0]
    assert item["request_id"] == request_ids[-1]
    assert isinstance(item["created_at"], int) and abs(item["created_at"] - time.time()) < 60
    assert item["token_name"] == "test"
    assert item["model_name"] == "sim-chat"
    assert item["completion_tokens"] == 14 and item["prompt_tokens"] > 0
    assert item["quota"] == round((item["prompt_tokens"] * IN_NANO + 14 * OUT_NANO) * RMB_PER_USD / 10**9, 6)
    assert item["is_stream"] is False
    assert item["ip"] == "127.0.0.1"
    assert item["outcome"] == "success" and item["status"] == 200
    assert item["upstream"] == "sim-openai" and item["attempts"] == 1
    assert item["usage_estimated"] is False
    assert isinstance(item["use_time_ms"], int) and item["use_time_ms"] >= 0
    for field in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        assert item[field] == 0


async def test_log_self_shows_only_the_callers_account(gw: GatewayHandle) -> None:
    other = await new_account(gw)
    assert (await other.chat("sim-chat", "sim:tokens=5 mine")).status == 200
    assert (await Account(gw, gw.user, gw.key_record).logs())["total"] == 0
    assert (await other.logs())["total"] == 1


@pytest.mark.parametrize(("params", "param"), [
    ({"page": "0"}, "page"),
    ({"page": "-1"}, "page"),
    ({"page": "abc"}, "page"),
    ({"page": "1.5"}, "page"),
    ({"page_size": "0"}, "page_size"),
    ({"page_size": "101"}, "page_size"),
    ({"page_size": "x"}, "page_size"),
    ({"page": "99999999999999999999"}, "page"),
])
async def test_log_self_rejects_bad_paging(gw: GatewayHandle, params: dict[str, str], param: str) -> None:
    reply = await gw.request("GET", "/api/log/self", key=gw.user_token, params=params)
    assert reply.status == 400, reply.text
    err = _error(reply)
    assert err["code"] == "invalid_request" and err["param"] == param


async def test_log_self_page_size_100_is_allowed(gw: GatewayHandle) -> None:
    reply = await gw.request("GET", "/api/log/self", key=gw.user_token, params={"page_size": "100"})
    assert reply.status == 200
    assert reply.json()["data"]["page_size"] == 100
