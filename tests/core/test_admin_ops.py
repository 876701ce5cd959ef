"""The operator's admin API (CONTRACT 4, issue 15 point 6): PATCH/DELETE a user, balance
adjustments, unique names, everyone's request log, upstream health, and their CLI mirrors."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.accounts.metering.audit import run_audit
from gateway.cli.main import main

from .envelopes import assert_error
from .test_cli import config_file, run_cli


def client(gw: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


async def chat(gw: Any, key: str, model: str = "sim-chat", text: str = "hello") -> Any:
    async with client(gw, key) as c:
        return await c.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])


async def logs(gw: Any, query: str = "", expect: int | None = None) -> dict[str, Any]:
    """``GET /admin/logs``; waits for ``expect`` rows when given (logs are written in batches)."""
    for _ in range(200):
        reply = await gw.admin("GET", "/admin/logs" + query)
        assert reply.status == 200, reply.text
        body: dict[str, Any] = reply.json()
        if expect is None or body["total"] >= expect:
            return body
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {expect} log rows: {body}")


def assert_name_taken(reply: Any) -> dict[str, Any]:
    assert reply.status == 409, reply.text
    inner: dict[str, Any] = reply.json()["error"]
    assert inner["code"] == "name_taken" and inner["type"] == "invalid_request_error"
    assert inner["param"] == "name"
    return inner


async def test_new_routes_need_the_admin_key(gw: Any) -> None:
    for method, path in (("PATCH", "/admin/users/1"), ("DELETE", "/admin/users/1"),
                         ("POST", "/admin/users/1/adjust"), ("GET", "/admin/logs"),
                         ("GET", "/admin/upstreams"), ("GET", "/admin/models")):
        assert_error(await gw.request(method, path, json={}), "chat", 401, "invalid_api_key")
        assert_error(await gw.request(method, path, json={}, key=gw.user_token), "chat", 401,
                     "invalid_api_key")


async def test_patch_user_and_unique_names(gw: Any, make_config: Any, gateway_server: Any) -> None:
    uid = gw.user["id"]
    other = await gw.create_user("other")
    assert gw.user["enabled"] is True
    # Taken names: 409 on create and on rename; one's own name is not "taken".
    assert_name_taken(await gw.admin("POST", "/admin/users", {"name": "other"}))
    assert_name_taken(await gw.admin("PATCH", f"/admin/users/{uid}", {"name": "other"}))
    same = await gw.admin("PATCH", f"/admin/users/{uid}", {"name": gw.user["name"]})
    assert same.status == 200 and same.json()["name"] == gw.user["name"]

    renamed = await gw.admin("PATCH", f"/admin/users/{uid}", {"name": "renamed", "enabled": True})
    assert renamed.status == 200
    expected = {"id": uid, "name": "renamed", "group": "default", "quota_usd": 100.0, "used_usd": 0.0,
                "request_count": 0, "enabled": True}
    assert {k: renamed.json()[k] for k in expected} == expected
    assert (await gw.admin("POST", "/admin/users", {"name": gw.user["name"]})).status == 201  # freed

    for body, param in (({"group": "nope"}, "group"), ({"name": ""}, "name"), ({"enabled": "yes"}, "enabled"),
                        ({"colour": "blue"}, "colour")):
        reply = await gw.admin("PATCH", f"/admin/users/{uid}", body)
        err = assert_error(reply, "chat", 400, "invalid_request")
        assert err["param"] == param
    assert_error(await gw.admin("PATCH", "/admin/users/999", {"name": "x"}), "chat", 404, "not_found")
    assert_error(await gw.admin("PATCH", "/admin/users/abc", {"name": "x"}), "chat", 404, "not_found")
    assert (await gw.admin("GET", f"/admin/users/{other['id']}")).json()["name"] == "other"


async def test_disable_user_refuses_keys_and_token_at_once(gw: Any) -> None:
    uid = gw.user["id"]
    assert (await chat(gw, gw.key)).choices[0].message.content  # cached in the authenticator now
    reply = await gw.admin("PATCH", f"/admin/users/{uid}", {"enabled": False})
    assert reply.status == 200 and reply.json()["enabled"] is False
    with pytest.raises(openai.AuthenticationError) as refused:
        await chat(gw, gw.key)
    assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
    assert_error(await gw.request("GET", "/api/user/self", key=gw.user_token), "chat", 401, "invalid_api_key")
    listed = (await gw.admin("GET", "/admin/users")).json()["data"]
    assert [u["enabled"] for u in listed if u["id"] == uid] == [False]

    assert (await gw.admin("PATCH", f"/admin/users/{uid}", {"enabled": True})).json()["enabled"] is True
    assert (await chat(gw, gw.key)).choices[0].message.content


async def test_delete_user_stops_keys_and_keeps_history(gw: Any) -> None:
    uid = gw.user["id"]
    await chat(gw, gw.key)
    await logs(gw, f"?user_id={uid}", expect=1)
    assert (await gw.admin("DELETE", f"/admin/users/{uid}")).status == 204
    with pytest.raises(openai.AuthenticationError):
        await chat(gw, gw.key)
    assert_error(await gw.request("GET", "/api/user/self", key=gw.user_token), "chat", 401, "invalid_api_key")
    assert_error(await gw.admin("GET", f"/admin/users/{uid}"), "chat", 404, "not_found")
    assert_error(await gw.admin("DELETE", f"/admin/users/{uid}"), "chat", 404, "not_found")
    topup = await gw.admin("POST", f"/admin/users/{uid}/topup", {"amount_usd": 1})
    assert_error(topup, "chat", 404, "not_found")
    assert uid not in [u["id"] for u in (await gw.admin("GET", "/admin/users")).json()["data"]]
    # History kept: the call is still in everyone's log, and the books still balance.
    kept = await logs(gw, f"?user_id={uid}")
    assert kept["total"] >= 1 and kept["data"][0]["model"] == "sim-chat"
    assert await run_audit(gw.gateway.storage) == []
    again = await gw.create_user(gw.user["name"])  # the name is free again
    assert again["id"] != uid


async def test_adjust_balance(gw: Any) -> None:
    uid = gw.user["id"]
    up = await gw.admin("POST", f"/admin/users/{uid}/adjust", {"amount_usd": 2.5, "reason": "goodwill"})
    assert up.status == 200 and up.json()["quota_usd"] == 102.5
    down = await gw.admin("POST", f"/admin/users/{uid}/adjust", {"amount_usd": -100, "reason": "refund"})
    assert down.status == 200 and down.json()["quota_usd"] == 2.5
    err = assert_error(await gw.admin("POST", f"/admin/users/{uid}/adjust",
                                      {"amount_usd": -2.6, "reason": "too much"}),
                       "chat", 400, "balance_below_zero")
    assert err["param"] == "amount_usd" and "2.5" in err["message"]
    to_zero = await gw.admin("POST", f"/admin/users/{uid}/adjust", {"amount_usd": -2.5, "reason": "close"})
    assert to_zero.json()["quota_usd"] == 0
    for body, param in (({"amount_usd": 0, "reason": "x"}, "amount_usd"), ({"amount_usd": 1}, "reason"),
                        ({"amount_usd": 1, "reason": "  "}, "reason"), ({"amount_usd": "1", "reason": "x"},
                                                                       "amount_usd")):
        err = assert_error(await gw.admin("POST", f"/admin/users/{uid}/adjust", body), "chat", 400,
                           "invalid_request")
        assert err["param"] == param
    assert_error(await gw.admin("POST", "/admin/users/999/adjust", {"amount_usd": 1, "reason": "x"}),
                 "chat", 404, "not_found")
    # Each adjustment is one ledger row with its reason, and the balance matches the ledger.
    storage = gw.gateway.storage
    rows = await storage._fetch("SELECT delta_nano, note FROM ledger WHERE kind = 'adjust' AND user_id = ? "
                                "ORDER BY id", (uid,))
    assert [(r["delta_nano"], r["note"]) for r in rows] == [
        (2_500_000_000, "goodwill"), (-100_000_000_000, "refund"), (-2_500_000_000, "close")]
    assert await run_audit(storage) == []
    # At zero, calls are refused before any upstream sees them.
    with pytest.raises(openai.PermissionDeniedError):
        await chat(gw, gw.key)


async def test_logs_filters_and_paging(gw: Any) -> None:
    before = int(time.time())
    second = await gw.create_user("second")
    key2 = await gw.create_key(second["id"], name="k2")
    await chat(gw, gw.key, "sim-chat")
    await chat(gw, gw.key, "sim-claude")
    await chat(gw, key2["key"], "sim-chat")
    broke = await gw.create_key(second["id"], name="broke", quota_usd=0)
    with pytest.raises(openai.PermissionDeniedError):  # refused, no charge, but logged
        await chat(gw, broke["key"], "sim-chat")
    everything = await logs(gw, expect=4)
    rows = everything["data"]
    assert everything["total"] == 4 and len(rows) == 4
    assert [r["created_at"] for r in rows] == sorted((r["created_at"] for r in rows), reverse=True)
    assert rows[0]["user_id"] == second["id"] and rows[0]["status"] == 403  # newest first
    assert rows[0]["cost_usd"] == 0 and rows[0]["error_code"] == "insufficient_quota"
    assert {"request_id", "key_id", "model", "status", "prompt_tokens", "completion_tokens", "cost_usd",
            "use_time_ms", "upstream", "outcome"} <= set(rows[0])
    assert rows[-1]["cost_usd"] > 0 and rows[-1]["upstream"] == "sim-openai"

    assert (await logs(gw, f"?user_id={gw.user['id']}"))["total"] == 2
    assert (await logs(gw, f"?key_id={key2['id']}"))["total"] == 1
    assert (await logs(gw, "?model=sim-chat"))["total"] == 3
    assert (await logs(gw, f"?model=sim-chat&user_id={second['id']}"))["total"] == 2
    assert (await logs(gw, "?status=403"))["total"] == 1
    assert (await logs(gw, "?status=200"))["total"] == 3
    assert (await logs(gw, f"?since={before}"))["total"] == 4
    assert (await logs(gw, f"?until={before}"))["total"] == 0
    assert (await logs(gw, f"?since={int(time.time()) + 60}"))["total"] == 0
    rid = rows[1]["request_id"]
    assert [r["request_id"] for r in (await logs(gw, f"?request_id={rid}"))["data"]] == [rid]

    page1 = await logs(gw, "?page=1&page_size=3")
    page2 = await logs(gw, "?page=2&page_size=3")
    assert page1["total"] == page2["total"] == 4 and page1["page_size"] == 3
    assert [r["request_id"] for r in page1["data"] + page2["data"]] == [r["request_id"] for r in rows]
    assert (await logs(gw, "?page=3&page_size=3"))["data"] == []

    for query, param in (("?page=0", "page"), ("?page_size=1000", "page_size"), ("?user_id=x", "user_id"),
                         ("?status=42", "status"), ("?since=-1", "since"), ("?key_id=1.5", "key_id"),
                         ("?until=99999999999999999999", "until")):
        err = assert_error(await gw.admin("GET", "/admin/logs" + query), "chat", 400, "invalid_request")
        assert err["param"] == param


async def test_upstream_health(gateway_server: Any, make_config: Any) -> None:
    from tests.serving import free_port

    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: every attempt fails to connect
    config = make_config(extra_upstreams=[{"name": "dead-first", "protocol": "chat", "base_url": dead,
                                           "api_key": "sk-x", "models": ["sim-chat"], "priority": -1}])
    gw = await gateway_server(config)
    user = await gw.create_user("h")
    key = (await gw.create_key(user["id"]))["key"]

    fresh = (await gw.admin("GET", "/admin/upstreams")).json()["data"]
    assert [u["name"] for u in fresh] == ["sim-openai", "sim-anthropic", "sim-google", "dead-first"]
    assert all(u["state"] == "healthy" and u["cooling_until"] is None and u["error_rate"] == 0
               and u["latency_ms"] is None for u in fresh)
    assert fresh[0]["protocol"] == "chat" and fresh[0]["models"] == ["sim-chat", "sim-embed"]

    assert (await chat(gw, key)).choices[0].message.content  # failed over from dead-first
    by_name = {u["name"]: u for u in (await gw.admin("GET", "/admin/upstreams")).json()["data"]}
    dead_row, good = by_name["dead-first"], by_name["sim-openai"]
    assert dead_row["state"] == "cooling_down" and dead_row["cooling_until"] > time.time()
    assert dead_row["error_rate"] == 1.0 and dead_row["failures"] == 1 and dead_row["latency_ms"] is None
    assert good["state"] == "healthy" and good["error_rate"] == 0 and good["attempts"] == 1
    assert good["latency_ms"] is not None and good["latency_ms"] > 0
    assert by_name["sim-google"]["attempts"] == 0

    models = (await gw.admin("GET", "/admin/models")).json()
    sim_chat = next(m for m in models["data"] if m["id"] == "sim-chat")
    assert sim_chat["price"] == {"input_per_mtok": 0.5, "output_per_mtok": 1.5}
    assert sorted(sim_chat["upstreams"]) == ["dead-first", "sim-openai"]
    assert models["rmb_per_usd"] == 7.2


async def test_cli_mirrors(gw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ["--config", config_file(gw.gateway.config, tmp_path / "gateway.yaml"), "--json"]
    uid = str(gw.user["id"])
    code, user = await run_cli(capsys, "users", "update", uid, "--name", "cli-name", "--disable", *cfg)
    assert code == 0 and user["name"] == "cli-name" and user["enabled"] is False
    for _ in range(200):  # the running gateway sees the change within its poll interval
        if (await gw.request("GET", "/v1/models", key=gw.key)).status == 401:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the disabled user's key still works")
    code, user = await run_cli(capsys, "users", "update", uid, "--enable", *cfg)
    assert code == 0 and user["enabled"] is True
    code, user = await run_cli(capsys, "users", "adjust", uid, "-40", "--reason", "cli test", *cfg)
    assert code == 0 and user["quota_usd"] == 60
    code, err = await run_cli(capsys, "users", "adjust", uid, "-61", "--reason", "too much", *cfg)
    assert code == 1 and err["error"]["code"] == "balance_below_zero"
    taken = await gw.create_user("taken")
    code, err = await run_cli(capsys, "users", "update", uid, "--name", taken["name"], *cfg)
    assert code == 1 and err["error"]["code"] == "name_taken"

    await chat(gw, gw.key)
    await logs(gw, expect=1)
    code, found = await run_cli(capsys, "logs", "--user-id", uid, "--model", "sim-chat", *cfg)
    assert code == 0 and found["total"] == 1 and found["data"][0]["model"] == "sim-chat"

    code, health = await run_cli(capsys, "upstreams", "--url", gw.base_url, *cfg)
    assert code == 0 and {u["name"] for u in health["data"]} >= {"sim-openai"}
    code, _ = await run_cli(capsys, "users", "delete", uid, *cfg)
    assert code == 0
    assert await asyncio.to_thread(main, ["users", "delete", uid, *cfg]) == 1
