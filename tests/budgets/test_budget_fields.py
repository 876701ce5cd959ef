"""Budgets in the admin API, the users' own keys API, ``/api/user/self`` and the CLI (CONTRACT 7):
set, shown with the current period's spend, changed, cleared, and refused with a 400 naming the
field when a budget would have no period."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import orjson
import pytest

from gateway.cli.main import main

from .conftest import BudgetClock
from .helpers import CALL_USD, flat_call, openai_client, shown_key, shown_user

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle


def _budget(record: dict[str, Any]) -> tuple[Any, Any, Any]:
    return record["budget_usd"], record["budget_period"], record["budget_spent_usd"]


async def test_admin_api_sets_shows_changes_and_clears_budgets(flat_gw: GatewayHandle,
                                                               budget_clock: BudgetClock) -> None:
    gw = flat_gw
    reply = await gw.admin("POST", "/admin/users", {"name": "budgeted", "quota_usd": 10,
                                                    "budget_usd": 2, "budget_period": "week"})
    assert reply.status == 201, reply.text
    user = reply.json()
    assert _budget(user) == (2.0, "week", 0.0)
    key = await gw.create_key(user["id"], budget_usd=0.5, budget_period="day")
    assert _budget(key) == (0.5, "day", 0.0)
    plain = await gw.create_key(user["id"])
    assert _budget(plain) == (None, None, None)

    reply = await gw.admin("PATCH", f"/admin/keys/{key['id']}", {"budget_usd": 1})
    assert reply.status == 200 and _budget(reply.json()) == (1.0, "day", 0.0), reply.text
    reply = await gw.admin("PATCH", f"/admin/keys/{key['id']}", {"budget_period": "month"})
    assert reply.status == 200 and _budget(reply.json()) == (1.0, "month", 0.0), reply.text

    # A budget without a period, or an unknown period: 400 naming budget_period; nothing changed.
    for path, method, body in (
            (f"/admin/keys/{key['id']}", "PATCH", {"budget_period": None}),
            ("/admin/keys", "POST", {"user_id": user["id"], "budget_usd": 1}),
            ("/admin/keys", "POST", {"user_id": user["id"], "budget_usd": 1, "budget_period": "year"}),
            (f"/admin/users/{user['id']}", "PATCH", {"budget_period": None}),
            ("/admin/users", "POST", {"name": "no-period", "budget_usd": 1})):
        reply = await gw.admin(method, path, body)
        assert reply.status == 400, (path, body, reply.text)
        error = reply.json()["error"]
        assert error["code"] == "invalid_request" and "budget_period" in error["message"], error
    assert _budget(await shown_key(gw, key["id"])) == (1.0, "month", 0.0)

    # The spend of the period shows in the key's, the user's and /api/user/self's budget.
    async with openai_client(gw, key["key"]) as client:
        await flat_call(client)
    assert _budget(await shown_key(gw, key["id"])) == (1.0, "month", pytest.approx(CALL_USD))
    assert _budget(await shown_user(gw, user["id"])) == (2.0, "week", pytest.approx(CALL_USD))
    listed = (await gw.admin("GET", f"/admin/keys?user_id={user['id']}")).json()["data"]
    assert [_budget(k) for k in listed] == [(1.0, "month", pytest.approx(CALL_USD)), (None, None, None)]
    users = (await gw.admin("GET", "/admin/users")).json()["data"]
    assert [_budget(u) for u in users if u["id"] == user["id"]] == [(2.0, "week", pytest.approx(CALL_USD))]
    me = (await gw.request("GET", "/api/user/self", key=user["user_token"])).json()["data"]
    assert _budget(me) == (2.0, "week", pytest.approx(CALL_USD))

    # A new week: the user's count starts again; the key's month goes on.
    budget_clock.now += 3 * 86_400
    assert _budget(await shown_user(gw, user["id"]))[2] == 0.0
    assert _budget(await shown_key(gw, key["id"]))[2] == pytest.approx(CALL_USD)

    reply = await gw.admin("PATCH", f"/admin/users/{user['id']}", {"budget_usd": None})
    assert reply.status == 200 and _budget(reply.json()) == (None, "week", 0.0), reply.text
    reply = await gw.admin("PATCH", f"/admin/keys/{key['id']}", {"budget_usd": None, "budget_period": None})
    assert reply.status == 200 and _budget(reply.json()) == (None, None, None), reply.text


async def test_users_set_budgets_on_their_own_keys(flat_gw: GatewayHandle, budget_clock: BudgetClock) -> None:
    gw = flat_gw
    user = await gw.create_user(quota_usd=5)
    token = user["user_token"]
    reply = await gw.request("POST", "/api/keys", json={"name": "mine", "budget_usd": 0.25,
                                                         "budget_period": "day"}, key=token)
    assert reply.status == 201, reply.text
    key = reply.json()
    assert _budget(key) == (0.25, "day", 0.0)
    reply = await gw.request("PATCH", f"/api/keys/{key['id']}", json={"budget_period": "week"}, key=token)
    assert reply.status == 200 and _budget(reply.json()) == (0.25, "week", 0.0), reply.text
    reply = await gw.request("PATCH", f"/api/keys/{key['id']}", json={"budget_period": "fortnight"},
                             key=token)
    assert reply.status == 400 and "budget_period" in reply.json()["error"]["message"], reply.text
    async with openai_client(gw, key["key"]) as client:
        await flat_call(client)
    listed = (await gw.request("GET", "/api/keys", key=token)).json()["data"]
    assert [_budget(k) for k in listed] == [(0.25, "week", pytest.approx(CALL_USD))]


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr().out
    return code, orjson.loads(out) if out.strip() else None


async def test_cli_sets_shows_and_clears_budgets(flat_gw: GatewayHandle, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 budget_clock: BudgetClock) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_bytes(msgspec.json.encode(flat_gw.gateway.config))
    cfg = ["--config", str(path), "--json"]
    code, user = await _cli(capsys, "users", "create", "--name", "cli-budget", "--quota-usd", "3",
                            "--budget-usd", "1.5", "--budget-period", "month", *cfg)
    assert code == 0 and _budget(user) == (1.5, "month", 0.0), user
    code, user = await _cli(capsys, "users", "update", str(user["id"]), "--budget-usd", "2", *cfg)
    assert code == 0 and _budget(user) == (2.0, "month", 0.0), user
    code, user = await _cli(capsys, "users", "update", str(user["id"]), "--no-budget", *cfg)
    assert code == 0 and _budget(user) == (None, None, None), user

    code, key = await _cli(capsys, "keys", "create", "--user-id", str(user["id"]), "--budget-usd", "0.5",
                           "--budget-period", "day", *cfg)
    assert code == 0 and _budget(key) == (0.5, "day", 0.0), key
    code, key = await _cli(capsys, "keys", "update", str(key["id"]), "--budget-period", "week", *cfg)
    assert code == 0 and _budget(key) == (0.5, "week", 0.0), key
    code, listed = await _cli(capsys, "keys", "list", "--user-id", str(user["id"]), *cfg)
    assert code == 0 and [_budget(k) for k in listed["data"]] == [(0.5, "week", 0.0)]
    code, key = await _cli(capsys, "keys", "update", str(key["id"]), "--no-budget", *cfg)
    assert code == 0 and _budget(key) == (None, None, None), key
    code, error = await _cli(capsys, "keys", "create", "--user-id", str(user["id"]), "--budget-usd", "1",
                             *cfg)
    assert code == 1 and "budget_period" in error["error"]["message"], error
