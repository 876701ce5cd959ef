"""Authentication through HTTP in all three envelopes, via the probe plugin (no translator needed)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import pytest_asyncio
from starlette.requests import Request

from gateway.accounts.keys import generate_api_key, hash_secret
from gateway.runtime.errors import InvalidApiKey

from .envelopes import FAMILIES, AuthProbe, assert_error, credentials, no_credentials


@pytest_asyncio.fixture
async def probe(gateway_server: Any, make_config: Any) -> Any:
    """A gateway with the probe routes, a user ($100) and an unrestricted key."""
    handle = await gateway_server(make_config(trusted_proxies=["127.0.0.1/32"]), extra_plugins=[AuthProbe()])
    handle.user = await handle.create_user()
    handle.key_record = await handle.create_key(handle.user["id"], name="probe")
    return handle


async def call(handle: Any, family: str, headers: dict[str, str], **kwargs: Any) -> Any:
    return await handle.request("GET", f"/probe/{family}", headers=headers, **kwargs)


@pytest.mark.parametrize("family", FAMILIES)
async def test_valid_key_passes(probe: Any, family: str) -> None:
    reply = await call(probe, family, credentials(family, probe.key))
    assert reply.status == 200, reply.text
    assert reply.json() == {"key_id": probe.key_record["id"], "user_id": probe.user["id"], "ip": "127.0.0.1"}
    assert reply.headers["X-Service-Request-Id"].startswith("req_")


@pytest.mark.parametrize("family", FAMILIES)
async def test_missing_key(probe: Any, family: str) -> None:
    assert_error(await call(probe, family, no_credentials(family)), family, 401, "invalid_api_key")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("bad", ["abc", "sk-short", "sk-" + "a" * 30 + "!", "SK-" + "a" * 40,
                                 "sk-" + "a" * 300])
async def test_wrong_format(probe: Any, family: str, bad: str) -> None:
    inner = assert_error(await call(probe, family, credentials(family, bad)), family, 401, "invalid_api_key")
    assert bad not in inner["message"]  # a credential is never echoed


@pytest.mark.parametrize("family", FAMILIES)
async def test_unknown_key(probe: Any, family: str) -> None:
    assert_error(await call(probe, family, credentials(family, generate_api_key())), family, 401,
                 "invalid_api_key")


@pytest.mark.parametrize("family", FAMILIES)
async def test_disabled_key(probe: Any, family: str) -> None:
    key = await probe.create_key(probe.user["id"], enabled=False)
    assert_error(await call(probe, family, credentials(family, key["key"])), family, 401, "invalid_api_key")


@pytest.mark.parametrize("family", FAMILIES)
async def test_user_token_is_not_an_api_key(probe: Any, family: str) -> None:
    reply = await call(probe, family, credentials(family, probe.user_token))
    assert_error(reply, family, 401, "invalid_api_key")


@pytest.mark.parametrize("family", FAMILIES)
async def test_expired_key(probe: Any, family: str) -> None:
    expired = await probe.create_key(probe.user["id"], expires_at=int(time.time()) - 5)
    live = await probe.create_key(probe.user["id"], expires_at=int(time.time()) + 3600)
    reply = await call(probe, family, credentials(family, expired["key"]))
    assert_error(reply, family, 401, "expired_api_key")
    assert (await call(probe, family, credentials(family, live["key"]))).status == 200


@pytest.mark.parametrize("family", FAMILIES)
async def test_ip_allowlist(probe: Any, family: str) -> None:
    outside = await probe.create_key(probe.user["id"], allow_ips=["10.0.0.0/8", "192.0.2.1"])
    inside = await probe.create_key(probe.user["id"], allow_ips=["10.0.0.0/8", "127.0.0.0/8"])
    reply = await call(probe, family, credentials(family, outside["key"]))
    assert_error(reply, family, 403, "ip_not_allowed")
    assert (await call(probe, family, credentials(family, inside["key"]))).status == 200


@pytest.mark.parametrize("family", FAMILIES)
async def test_model_allowlist(probe: Any, family: str) -> None:
    key = await probe.create_key(probe.user["id"], models=["sim-chat"])
    headers = credentials(family, key["key"])
    assert_error(await call(probe, family, headers, params={"model": "sim-claude"}), family, 403,
                 "model_not_allowed")
    assert (await call(probe, family, headers, params={"model": "sim-chat"})).status == 200
    assert_error(await call(probe, family, headers, params={"model": "no-such-model"}), family, 404,
                 "model_not_found")


async def test_forwarded_for_is_believed_from_trusted_proxy_only(probe: Any, gateway_server: Any,
                                                                 make_config: Any) -> None:
    key = await probe.create_key(probe.user["id"], allow_ips=["203.0.113.5"])
    headers = credentials("chat", key["key"])
    reply = await call(probe, "chat", {**headers, "X-Forwarded-For": "198.51.100.1, 203.0.113.5"})
    assert reply.status == 200 and reply.json()["ip"] == "203.0.113.5"
    assert_error(await call(probe, "chat", headers), "chat", 403, "ip_not_allowed")
    # Without trusted proxies the header is ignored: the socket peer counts.
    other = await gateway_server(make_config(), extra_plugins=[AuthProbe()])
    user = await other.create_user()
    key = await other.create_key(user["id"], allow_ips=["203.0.113.5"])
    reply = await call(other, "chat", {**credentials("chat", key["key"]), "X-Forwarded-For": "203.0.113.5"})
    assert_error(reply, "chat", 403, "ip_not_allowed")


async def test_trailing_newline_is_refused(probe: Any) -> None:
    # In a header a newline cannot even be sent over HTTP/1.1; in the v1beta query it can.
    assert_error(await call(probe, "v1beta", {}, params={"key": probe.key + "\n"}), "v1beta", 401,
                 "invalid_api_key")
    assert (await call(probe, "v1beta", {}, params={"key": probe.key})).status == 200
    # And at the Authenticator itself, as a server that passed it through would hand it over.
    for value in (probe.key + "\n", probe.key + "\r\n", probe.key + " "):
        scope = {"type": "http", "method": "GET", "path": "/", "query_string": b"",
                 "client": ("127.0.0.1", 1), "headers": [(b"authorization", b"Bearer " + value.encode())]}
        with pytest.raises(InvalidApiKey):
            await probe.gateway.auth.authenticate(Request(scope), "chat")


async def test_messages_needs_a_date_version_header(probe: Any) -> None:
    key = {"x-api-key": probe.key}
    assert_error(await call(probe, "messages", key), "messages", 400, "invalid_request")
    for bad in ("latest", "2023-6-1", "2023-13-01", "2023-06-01x"):
        reply = await call(probe, "messages", {**key, "anthropic-version": bad})
        assert_error(reply, "messages", 400, "invalid_request")
    for good in ({"anthropic-version": "2023-06-01"}, {"anthropic-version": "2025-05-14"},
                 {"vendorb-version": "2023-06-01"}):
        assert (await call(probe, "messages", {**key, **good})).status == 200
    # The SDK may send the key as a Bearer token instead of x-api-key.
    bearer = {"Authorization": f"Bearer {probe.key}", "anthropic-version": "2023-06-01"}
    assert (await call(probe, "messages", bearer)).status == 200
    # No key at all is 401 even without the version header.
    assert_error(await call(probe, "messages", {}), "messages", 401, "invalid_api_key")


async def test_v1beta_credential_sources(probe: Any) -> None:
    for headers, params in (({"x-vendorc-api-key": probe.key}, None), ({"x-goog-api-key": probe.key}, None),
                            ({}, {"key": probe.key}), ({"Authorization": f"Bearer {probe.key}"}, None)):
        assert (await call(probe, "v1beta", headers, params=params)).status == 200


async def test_user_token_endpoints(probe: Any) -> None:
    ok = await probe.request("GET", "/probe/user", key=probe.user_token)
    assert ok.status == 200 and ok.json() == {"user_id": probe.user["id"]}
    assert_error(await probe.request("GET", "/probe/user", key=probe.key), "chat", 401, "invalid_api_key")
    assert_error(await probe.request("GET", "/probe/user"), "chat", 401, "invalid_api_key")
    unknown = await probe.request("GET", "/probe/user", key="ut-" + "x" * 40)
    assert_error(unknown, "chat", 401, "invalid_api_key")


async def test_stored_hash_is_not_a_credential(probe: Any) -> None:
    record = await probe.gateway.storage.get_key(probe.key_record["id"])
    assert record.key_hash == hash_secret(probe.key)
    for family in FAMILIES:
        for forged in (record.key_hash, "sk-" + record.key_hash):
            reply = await call(probe, family, credentials(family, forged))
            assert_error(reply, family, 401, "invalid_api_key")


async def test_database_holds_no_plaintext_secret(probe: Any, tmp_path: Any) -> None:
    await probe.gateway.meter.flush()
    files = [p for p in tmp_path.iterdir() if p.name.startswith("gateway.db")]
    content = b"".join(p.read_bytes() for p in files)
    assert hash_secret(probe.key).encode() in content  # we are looking at the right database
    secret_body = probe.key[3:].encode()
    assert secret_body not in content
    assert probe.user_token[3:].encode() not in content


async def test_key_lookups_are_cached(probe: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = probe.gateway.storage
    calls: list[str] = []
    original = storage.key_by_hash

    async def counting(digest: str) -> Any:
        calls.append(digest)
        return await original(digest)

    monkeypatch.setattr(storage, "key_by_hash", counting)
    unknown = generate_api_key()
    for _ in range(5):
        assert (await call(probe, "chat", credentials("chat", probe.key))).status == 200
        assert (await call(probe, "chat", credentials("chat", unknown))).status == 401
    assert len(calls) == 2  # one miss each for the known and the unknown key; the rest from cache
