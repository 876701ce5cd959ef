"""A key's own ``cache: true`` (admin API and users' own keys API) turns the cache on for that key
when the config leaves it off for everyone; the listings show it, and a PATCH turns it off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai

from .conftest import cache_config, kept, nonce, openai_client, upstream_calls

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway


async def _header(client: openai.AsyncOpenAI, prompt: str) -> str | None:
    raw = await client.chat.completions.with_raw_response.create(
        model="c-chat", messages=[{"role": "user", "content": prompt}]
    )
    return raw.headers.get("x-gateway-cache")


async def _cache_off_gateway(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> GatewayHandle:
    return await gateway_server(cache_config(make_config, simulator.base_url, enabled=False))


async def test_admin_api_key_flag(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await _cache_off_gateway(gateway_server, make_config, simulator)
    user = await gw.create_user(quota_usd=10)
    cached = await gw.create_key(user["id"], name="cached", cache=True)
    plain = await gw.create_key(user["id"], name="plain")
    assert (cached["cache"], plain["cache"]) == (True, False)
    listed = (await gw.admin("GET", f"/admin/keys?user_id={user['id']}")).json()
    rows = listed["data"] if isinstance(listed, dict) else listed
    assert {k["name"]: k["cache"] for k in rows} == {"cached": True, "plain": False}

    prompt = nonce()
    assert await _header(openai_client(gw, plain["key"]), prompt) is None  # not served by the cache
    assert await _header(openai_client(gw, cached["key"]), prompt) == "miss"
    await kept(gw)
    assert await _header(openai_client(gw, cached["key"]), prompt) == "hit"
    assert await _header(openai_client(gw, plain["key"]), prompt) is None
    assert await upstream_calls(simulator.base_url, prompt) == 3  # the plain key's two, one miss

    patched = await gw.admin("PATCH", f"/admin/keys/{cached['id']}", {"cache": False})
    assert patched.status == 200 and patched.json()["cache"] is False
    assert await _header(openai_client(gw, cached["key"]), prompt) is None
    bad = await gw.admin("PATCH", f"/admin/keys/{cached['id']}", {"cache": "yes"})
    assert bad.status == 400 and "cache" in bad.text


async def test_users_keys_api_flag(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await _cache_off_gateway(gateway_server, make_config, simulator)
    user = await gw.create_user(quota_usd=10)
    token = {"Authorization": f"Bearer {user['user_token']}"}
    made = await gw.request("POST", "/api/keys", json={"name": "mine", "cache": True}, headers=token)
    assert made.status in (200, 201), made.text
    key = made.json()
    assert key["cache"] is True
    prompt = nonce()
    client = openai_client(gw, key["key"])
    assert await _header(client, prompt) == "miss"
    await kept(gw)
    assert await _header(client, prompt) == "hit"
    off = await gw.request("PATCH", f"/api/keys/{key['id']}", json={"cache": False}, headers=token)
    assert off.status == 200 and off.json()["cache"] is False
    assert await _header(client, prompt) is None
