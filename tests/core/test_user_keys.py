"""Users' own keys with their user token (CONTRACT 4a, ``plugins.user_keys``)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from gateway.accounts.keys import is_api_key_shaped

from .envelopes import assert_error


async def models_status(gw: Any, key: str) -> int:
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        try:
            await client.models.list()
        except openai.APIStatusError as exc:
            return exc.status_code
    return 200


async def test_credentials(gw: Any) -> None:
    for method, path in (("GET", "/api/keys"), ("POST", "/api/keys"), ("GET", "/api/keys/1"),
                         ("PATCH", "/api/keys/1"), ("DELETE", "/api/keys/1")):
        assert_error(await gw.request(method, path, json={}), "chat", 401, "invalid_api_key")
        for wrong in (gw.key, "admin-test-key", "ut-" + "0" * 40):  # an API key, the admin key, unknown
            assert_error(await gw.request(method, path, json={}, key=wrong), "chat", 401, "invalid_api_key")


async def test_create_list_patch_delete(gw: Any) -> None:
    token = gw.user_token
    created = await gw.request("POST", "/api/keys", key=token, json={
        "name": "mine", "quota_usd": 2, "models": ["sim-chat"], "allow_ips": ["127.0.0.1"],
        "expires_at": 2_000_000_000})
    assert created.status == 201, created.text
    key = created.json()
    assert is_api_key_shaped(key["key"]) and "user_id" not in key
    # The same answer as the admin API's, minus user_id (and the secret, shown only once).
    admin_view = (await gw.admin("GET", f"/admin/keys/{key['id']}")).json()
    assert admin_view.pop("user_id") == gw.user["id"]
    assert key | {"key": key["masked"]} == admin_view
    assert await models_status(gw, key["key"]) == 200

    listed = (await gw.request("GET", "/api/keys", key=token)).json()["data"]
    assert [k["id"] for k in listed] == [gw.key_record["id"], key["id"]]
    assert key["key"] not in str(listed) and all("user_id" not in k for k in listed)
    one = await gw.request("GET", f"/api/keys/{key['id']}", key=token)
    assert one.status == 200 and one.json()["name"] == "mine"

    patched = await gw.request("PATCH", f"/api/keys/{key['id']}", key=token,
                               json={"enabled": False, "quota_usd": None, "name": "off"})
    assert patched.status == 200
    assert patched.json() | {"created_at": 0} == key | {
        "key": key["masked"], "enabled": False, "quota_usd": None, "name": "off", "created_at": 0}
    assert await models_status(gw, key["key"]) == 401  # refused at once
    enable = await gw.request("PATCH", f"/api/keys/{key['id']}", key=token, json={"enabled": True})
    assert enable.status == 200
    assert await models_status(gw, key["key"]) == 200

    assert (await gw.request("DELETE", f"/api/keys/{key['id']}", key=token)).status == 204
    assert await models_status(gw, key["key"]) == 401
    assert_error(await gw.request("GET", f"/api/keys/{key['id']}", key=token), "chat", 404, "not_found")


async def test_bad_fields_use_the_admin_validation(gw: Any) -> None:
    token = gw.user_token
    for body, param in (({"user_id": 1}, "user_id"), ({"models": ["nope"]}, "models[0]"),
                        ({"allow_ips": ["not-an-ip"]}, "allow_ips[0]"), ({"quota_usd": -1}, "quota_usd"),
                        ({"colour": "blue"}, "colour"), ({"expires_at": "soon"}, "expires_at")):
        err = assert_error(await gw.request("POST", "/api/keys", key=token, json=body), "chat", 400,
                           "invalid_request")
        assert err["param"] == param, err
    for raw in (b"[1]", b"{", b""):
        reply = await gw.request("POST", "/api/keys", key=token, data=raw,
                                 headers={"Content-Type": "application/json"})
        assert_error(reply, "chat", 400, "invalid_request")
    kid = gw.key_record["id"]
    err = assert_error(await gw.request("PATCH", f"/api/keys/{kid}", key=token, json={"user_id": 2}),
                       "chat", 400, "invalid_request")
    assert err["param"] == "user_id"
    assert (await gw.request("GET", "/api/keys", key=token)).json()["data"][0]["id"] == kid  # unchanged


async def test_another_users_key_is_not_found(gw: Any) -> None:
    other = await gw.create_user("other")
    theirs = await gw.create_key(other["id"], name="theirs")
    for method, body in (("GET", None), ("PATCH", {"enabled": False}), ("DELETE", None)):
        assert_error(await gw.request(method, f"/api/keys/{theirs['id']}", key=gw.user_token, json=body),
                     "chat", 404, "not_found")
    for bad in ("999999", "x", "0", "99999999999999999999"):
        assert_error(await gw.request("GET", f"/api/keys/{bad}", key=gw.user_token), "chat", 404, "not_found")
    assert await models_status(gw, theirs["key"]) == 200  # untouched
    assert [k["id"] for k in (await gw.request("GET", "/api/keys", key=other["user_token"])).json()["data"]] \
        == [theirs["id"]]


@pytest.fixture
def group_config(make_config: Any) -> Any:
    return make_config(groups={"default": {"ratio": 1.0},
                               "basic": {"ratio": 1.0, "models": ["sim-chat", "sim-embed"]}})


async def test_no_more_than_own_rights(gateway_server: Any, group_config: Any) -> None:
    gw = await gateway_server(group_config)
    user = await gw.create_user("basic-user", group="basic")
    token = user["user_token"]
    reply = await gw.request("POST", "/api/keys", key=token, json={"models": ["sim-chat", "sim-claude"]})
    err = assert_error(reply, "chat", 403, "permission_denied")
    assert err["param"] == "models[1]"
    ok = await gw.request("POST", "/api/keys", key=token, json={"models": ["sim-chat"]})
    assert ok.status == 201
    kid = ok.json()["id"]
    reply = await gw.request("PATCH", f"/api/keys/{kid}", key=token, json={"models": ["sim-gemini"]})
    err = assert_error(reply, "chat", 403, "permission_denied")
    assert err["param"] == "models[0]"
    # "Every model" is allowed: the group still bounds it at call time.
    everything = await gw.request("POST", "/api/keys", key=token, json={"models": None})
    assert everything.status == 201
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=everything.json()["key"],
                                  max_retries=0) as client:
        with pytest.raises(openai.PermissionDeniedError):
            await client.chat.completions.create(model="sim-claude",
                                                 messages=[{"role": "user", "content": "x"}])
    # The admin API is not bound by it (operators decide).
    by_admin = await gw.admin("POST", "/admin/keys", {"user_id": user["id"], "models": ["sim-claude"]})
    assert by_admin.status == 201


async def test_disabled_user_cannot_manage_keys(gw: Any) -> None:
    assert (await gw.admin("PATCH", f"/admin/users/{gw.user['id']}", {"enabled": False})).status == 200
    assert_error(await gw.request("GET", "/api/keys", key=gw.user_token), "chat", 401, "invalid_api_key")
    reply = await gw.request("POST", "/api/keys", key=gw.user_token, json={})
    assert_error(reply, "chat", 401, "invalid_api_key")
