"""The admin API of CONTRACT section 4."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.accounts.keys import is_api_key_shaped, is_user_token_shaped

from .envelopes import assert_error


async def test_admin_key_is_required(gw: Any) -> None:
    for method, path in (("GET", "/admin/users"), ("POST", "/admin/users"), ("GET", "/admin/keys"),
                         ("POST", "/admin/keys"), ("PATCH", "/admin/keys/1"), ("DELETE", "/admin/keys/1"),
                         ("POST", "/admin/users/1/topup")):
        assert_error(await gw.request(method, path, json={}), "chat", 401, "invalid_api_key")
        assert_error(await gw.admin(method, path, {}, admin_key="wrong"), "chat", 401, "invalid_api_key")
    # An API key or a user token is not the admin key either.
    assert_error(await gw.request("GET", "/admin/users", key=gw.key), "chat", 401, "invalid_api_key")
    assert_error(await gw.request("GET", "/admin/users", key=gw.user_token), "chat", 401, "invalid_api_key")


@pytest.mark.parametrize("admin_key", [None, ""])
async def test_no_admin_key_configured_disables_the_admin_api(gateway_server: Any, make_config: Any,
                                                              admin_key: str | None) -> None:
    handle = await gateway_server(make_config(admin_key=admin_key))
    for key in ("", "admin-test-key", "None"):
        assert_error(await handle.admin("GET", "/admin/users", admin_key=key), "chat", 401, "invalid_api_key")


async def test_users(gw: Any) -> None:
    created = await gw.create_user("alice", quota_usd=12.5)
    assert created["name"] == "alice" and created["group"] == "default" and created["quota_usd"] == 12.5
    assert is_user_token_shaped(created["user_token"]) and not created["user_token"].startswith("sk-")
    topped = await gw.admin("POST", f"/admin/users/{created['id']}/topup", {"amount_usd": 7.5})
    assert topped.status == 200 and topped.json()["quota_usd"] == 20.0
    assert "user_token" not in topped.json()
    listed = (await gw.admin("GET", "/admin/users")).json()["data"]
    assert [u["name"] for u in listed] == ["u", "alice"]
    assert all("user_token" not in u for u in listed)
    one = await gw.admin("GET", f"/admin/users/{created['id']}")
    assert one.status == 200 and one.json()["quota_usd"] == 20.0
    no_quota = await gw.admin("POST", "/admin/users", {"name": "bob"})
    assert no_quota.status == 201 and no_quota.json()["quota_usd"] == 0


async def test_keys(gw: Any) -> None:
    user_id = gw.user["id"]
    created = await gw.create_key(user_id, name="ci", quota_usd=5, models=["sim-chat"],
                                  allow_ips=["10.0.0.0/8"], expires_at=2_000_000_000)
    full = created["key"]
    assert is_api_key_shaped(full) and created["masked"] != full and "..." in created["masked"]
    assert created | {"id": 0, "key": "", "masked": "", "created_at": 0} == {
        "id": 0, "user_id": user_id, "name": "ci", "key": "", "masked": "", "enabled": True,
        "quota_usd": 5.0, "spent_usd": 0.0, "models": ["sim-chat"], "allow_ips": ["10.0.0.0/8"],
        "expires_at": 2_000_000_000, "created_at": 0, "rpm": None, "tpm": None, "soft_limit_usd": None,
        "budget_usd": None, "budget_period": None, "budget_spent_usd": None, "cache": False}

    listed = await gw.admin("GET", f"/admin/keys?user_id={user_id}")
    assert listed.status == 200
    assert full not in listed.text  # shown masked from now on
    by_id = {k["id"]: k for k in listed.json()["data"]}
    assert set(by_id) == {gw.key_record["id"], created["id"]}
    assert by_id[created["id"]]["key"] == created["masked"]
    assert (await gw.admin("GET", "/admin/keys?user_id=999")).json() == {"data": []}

    patched = await gw.admin("PATCH", f"/admin/keys/{created['id']}",
                             {"quota_usd": None, "models": None, "enabled": False, "name": "renamed"})
    assert patched.status == 200
    body = patched.json()
    assert body["quota_usd"] is None and body["models"] is None and body["enabled"] is False
    assert body["name"] == "renamed" and body["allow_ips"] == ["10.0.0.0/8"]  # untouched
    assert full not in patched.text
    patched = await gw.admin("PATCH", f"/admin/keys/{created['id']}", {"quota_usd": 0})
    assert patched.json()["quota_usd"] == 0  # 0 = nothing may be spent, unlike null

    assert (await gw.admin("DELETE", f"/admin/keys/{created['id']}")).status == 204
    assert_error(await gw.admin("DELETE", f"/admin/keys/{created['id']}"), "chat", 404, "not_found")
    assert_error(await gw.admin("GET", f"/admin/keys/{created['id']}"), "chat", 404, "not_found")


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/admin/users/999/topup", {"amount_usd": 1}),
    ("GET", "/admin/users/999", None),
    ("PATCH", "/admin/keys/999", {"enabled": False}),
    ("DELETE", "/admin/keys/999", None),
    ("POST", "/admin/keys", {"user_id": 999}),
])
async def test_unknown_ids_are_404(gw: Any, method: str, path: str, body: Any) -> None:
    assert_error(await gw.admin(method, path, body), "chat", 404, "not_found")


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/admin/users", {"quota_usd": 1}, "name"),
    ("/admin/users", {"name": ""}, "name"),
    ("/admin/users", {"name": "x", "quota_usd": "lots"}, "quota_usd"),
    ("/admin/users", {"name": "x", "quota_usd": -1}, "quota_usd"),
    ("/admin/users", {"name": "x", "group": "vip"}, "group"),
    ("/admin/users", {"name": "x", "color": "red"}, "color"),
    ("/admin/users/1/topup", {"amount_usd": 0}, "amount_usd"),
    ("/admin/users/1/topup", {}, "amount_usd"),
    ("/admin/keys", {"name": "k"}, "user_id"),
    ("/admin/keys", {"user_id": 1, "models": ["gpt-99"]}, "models[0]"),
    ("/admin/keys", {"user_id": 1, "allow_ips": ["127.0.0.1", "nope"]}, "allow_ips[1]"),
    ("/admin/keys", {"user_id": 1, "expires_at": -5}, "expires_at"),
    ("/admin/keys", {"user_id": 1, "quota_usd": [1]}, "quota_usd"),
    ("/admin/keys", {"user_id": 1, "enabled": "yes"}, "enabled"),
])
async def test_validation_errors_name_the_field(gw: Any, path: str, body: Any, field: str) -> None:
    inner = assert_error(await gw.admin("POST", path, body), "chat", 400, "invalid_request")
    assert f"`{field}`" in inner["message"]
    assert inner.get("param") == field


async def test_patch_validation(gw: Any) -> None:
    key_id = gw.key_record["id"]
    for body, field in (({"user_id": 2}, "user_id"), ({"enabled": None}, "enabled"),
                        ({"allow_ips": ["300.1.1.1"]}, "allow_ips[0]")):
        inner = assert_error(await gw.admin("PATCH", f"/admin/keys/{key_id}", body), "chat", 400,
                             "invalid_request")
        assert f"`{field}`" in inner["message"]


async def test_malformed_json(gw: Any) -> None:
    for raw in (b"", b"{", b"[1, 2]", b"null"):
        reply = await gw.request("POST", "/admin/users", data=raw,
                                 headers={"Authorization": "Bearer admin-test-key"})
        assert_error(reply, "chat", 400, "invalid_request")
    assert_error(await gw.admin("GET", "/admin/keys?user_id=abc"), "chat", 400, "invalid_request")
