"""Rate limits per key through HTTP with the official SDKs (SQLite, limits held in process).

A call over ``rpm`` / ``tpm`` is a 429 ``rate_limit_exceeded`` in the caller's envelope with
``Retry-After``, before any upstream call and without a charge; each SDK raises its own rate-limit
error. Served calls of a limited key carry the ``x-ratelimit-*`` headers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]  # google-genai

CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 5}


def oai(gw: GatewayHandle, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


async def limited_key(gw: GatewayHandle, **limits: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    user = await gw.create_user(quota_usd=10)
    return user, await gw.create_key(user["id"], **limits)


async def balance(gw: GatewayHandle, user_id: int) -> int:
    await gw.gateway.meter.flush()
    user = await gw.gateway.storage.get_user(user_id)
    assert user is not None
    return user.balance_nano


async def test_rpm_openai_headers_then_429_without_upstream_or_charge(gw: GatewayHandle) -> None:
    user, key = await limited_key(gw, rpm=2)
    async with oai(gw, key["key"]) as client:
        first = await client.chat.completions.with_raw_response.create(**CHAT)
        assert first.headers["x-ratelimit-limit-requests"] == "2"
        assert first.headers["x-ratelimit-remaining-requests"] == "1"
        assert first.headers["x-ratelimit-reset-requests"].endswith("s")
        assert "x-ratelimit-limit-tokens" not in first.headers  # no tpm on this key
        second = await client.chat.completions.with_raw_response.create(**CHAT)
        assert second.headers["x-ratelimit-remaining-requests"] == "0"
        before = await balance(gw, user["id"])
        with pytest.raises(openai.RateLimitError) as caught:
            await client.chat.completions.create(**CHAT)
    err = caught.value
    assert err.status_code == 429
    assert err.code == "rate_limit_exceeded"
    retry = int(err.response.headers["retry-after"])
    assert 1 <= retry <= 60
    assert await balance(gw, user["id"]) == before  # nothing held, nothing charged
    page = await gw.gateway.storage.log_page(user["id"], 1, 10)
    refused = [item for item in page.items if item.status == 429]
    assert len(refused) == 1
    assert refused[0].upstream is None and refused[0].attempts == 0 and refused[0].charge_nano == 0


async def test_key_without_limits_gets_no_headers(gw: GatewayHandle) -> None:
    reply = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=gw.key)
    assert reply.status == 200
    assert not [h for h in reply.headers if h.lower().startswith("x-ratelimit")]


async def test_anthropic_sdk_rate_limit_error(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, rpm=1)
    async with anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=key["key"], max_retries=0) as client:
        body: Any = {"model": "sim-claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        await client.messages.create(**body)
        with pytest.raises(anthropic.RateLimitError) as caught:
            await client.messages.create(**body)
    assert caught.value.status_code == 429
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]
    assert int(caught.value.response.headers["retry-after"]) >= 1


async def test_genai_sdk_rate_limit_error_and_count_tokens_counts(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, rpm=2)
    # No retry_options: the SDK then makes one attempt (it retries only when told to).
    client = genai.Client(api_key=key["key"], http_options=types.HttpOptions(
        base_url=gw.base_url, api_version="v1beta"))
    try:
        # countTokens is free but a call all the same: it uses one of the two.
        counted = await client.aio.models.count_tokens(model="sim-gemini", contents="hello")
        assert counted.total_tokens
        await client.aio.models.generate_content(model="sim-gemini", contents="hello")
        with pytest.raises(genai_errors.ClientError) as caught:
            await client.aio.models.generate_content(model="sim-gemini", contents="hello")
    finally:
        await client.aio.aclose()
    assert caught.value.code == 429
    assert caught.value.status == "RESOURCE_EXHAUSTED"


async def test_anthropic_count_tokens_is_limited(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, rpm=1)
    body = {"model": "sim-claude", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-api-key": key["key"], "anthropic-version": "2023-06-01"}
    ok = await gw.request("POST", "/v1/messages/count_tokens", json=body, headers=headers)
    assert ok.status == 200 and ok.headers["x-ratelimit-remaining-requests"] == "0"
    refused = await gw.request("POST", "/v1/messages/count_tokens", json=body, headers=headers)
    assert refused.status == 429, refused.text
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert "retry-after" in refused.headers


async def test_tpm_counts_settled_input_plus_output(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, tpm=10)
    async with oai(gw, key["key"]) as client:
        first = await client.chat.completions.with_raw_response.create(**CHAT)
        usage = first.parse().usage
        assert usage is not None and usage.prompt_tokens > 0 and usage.completion_tokens > 0
        assert first.headers["x-ratelimit-limit-tokens"] == "10"
        assert first.headers["x-ratelimit-remaining-tokens"] == "10"  # its own tokens count once settled
        second = await client.chat.completions.with_raw_response.create(**CHAT)
        # The first call's input plus output, as the upstream reported them, are in the window.
        assert second.headers["x-ratelimit-remaining-tokens"] == str(max(10 - usage.total_tokens, 0))
        assert "x-ratelimit-limit-requests" not in second.headers  # no rpm on this key
        with pytest.raises(openai.RateLimitError) as caught:  # 2 x total_tokens >= 10
            await client.chat.completions.create(**CHAT)
    assert usage.total_tokens * 2 >= 10
    assert "tokens per minute" in caught.value.message
    assert int(caught.value.response.headers["retry-after"]) >= 1
    assert caught.value.response.headers["x-ratelimit-remaining-tokens"] == "0"


async def test_group_defaults_and_key_override(gateway_server: StartGateway, make_config: MakeConfig) -> None:
    gw = await gateway_server(make_config(groups={"default": {"rpm": 1}, "vip": {"ratio": 1.0}}))
    user = await gw.create_user(quota_usd=10)
    plain = await gw.create_key(user["id"])
    own = await gw.create_key(user["id"], rpm=3)
    assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=plain["key"])).status == 200
    refused = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=plain["key"])
    assert refused.status == 429
    for remaining in ("2", "1", "0"):
        reply = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=own["key"])
        assert reply.status == 200 and reply.headers["x-ratelimit-remaining-requests"] == remaining
    vip = await gw.create_user(quota_usd=10, group="vip")
    vip_key = await gw.create_key(vip["id"])
    for _ in range(3):  # a group without defaults: no limit
        assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=vip_key["key"])).status == 200


async def test_patch_applies_at_once_and_null_clears(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, rpm=1)
    assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])).status == 200
    assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])).status == 429
    patched = await gw.admin("PATCH", f"/admin/keys/{key['id']}", {"rpm": 2})
    assert patched.status == 200 and patched.json()["rpm"] == 2
    assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])).status == 200
    assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])).status == 429
    cleared = await gw.admin("PATCH", f"/admin/keys/{key['id']}", {"rpm": None})
    assert cleared.status == 200 and cleared.json()["rpm"] is None
    reply = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key["key"])
    assert reply.status == 200 and "x-ratelimit-limit-requests" not in reply.headers


@pytest.mark.parametrize("field", ["rpm", "tpm"])
@pytest.mark.parametrize("value", [0, -1, "10", 1.5, 2**63])
async def test_admin_refuses_bad_limits(gw: GatewayHandle, field: str, value: Any) -> None:
    created = await gw.admin("POST", "/admin/keys", {"user_id": gw.user["id"], field: value})
    assert created.status == 400, created.text
    assert field in created.text
    patched = await gw.admin("PATCH", f"/admin/keys/{gw.key_record['id']}", {field: value})
    assert patched.status == 400, patched.text


async def test_limits_shown_in_lists_and_users_own_keys(gw: GatewayHandle) -> None:
    made = await gw.request("POST", "/api/keys", json={"name": "mine", "rpm": 5, "tpm": 1000},
                            key=gw.user_token)
    assert made.status == 201, made.text
    assert made.json()["rpm"] == 5 and made.json()["tpm"] == 1000
    patched = await gw.request("PATCH", f"/api/keys/{made.json()['id']}", json={"tpm": None},
                               key=gw.user_token)
    assert patched.status == 200 and patched.json()["tpm"] is None and patched.json()["rpm"] == 5
    own = (await gw.request("GET", "/api/keys", key=gw.user_token)).json()["data"]
    assert {k["name"]: (k["rpm"], k["tpm"]) for k in own}["mine"] == (5, None)
    listed = (await gw.admin("GET", f"/admin/keys?user_id={gw.user['id']}")).json()["data"]
    assert {k["name"]: (k["rpm"], k["tpm"]) for k in listed} == {"test": (None, None), "mine": (5, None)}


async def test_stream_carries_headers_and_refusal_is_before_the_stream(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, rpm=1, tpm=100_000)
    async with oai(gw, key["key"]) as client:
        raw = await client.chat.completions.with_raw_response.create(**CHAT, stream=True)
        assert raw.headers["x-ratelimit-remaining-requests"] == "0"
        assert raw.headers["x-ratelimit-limit-tokens"] == "100000"
        chunks = [chunk async for chunk in raw.parse()]
        assert chunks
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(**CHAT, stream=True)


async def test_embeddings_are_limited(gw: GatewayHandle) -> None:
    _, key = await limited_key(gw, rpm=1)
    async with oai(gw, key["key"]) as client:
        await client.embeddings.create(model="sim-embed", input="hello")
        with pytest.raises(openai.RateLimitError):
            await client.embeddings.create(model="sim-embed", input="hello")
