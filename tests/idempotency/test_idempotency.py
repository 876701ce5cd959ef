"""Idempotent mutations through HTTP (CONTRACT 4c, issue 35): an ``Idempotency-Key`` repeat changes
nothing and replays the first answer; another body under the same key is a 409; a refusal frees the
key; 50 concurrent duplicates apply once, on SQLite and on PostgreSQL (there across two replicas
sharing the database); the kept answer never holds a shown-once secret in clear."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from gateway.storage.testing import fresh_database
from tests.conftest import ADMIN_KEY
from tests.core.envelopes import assert_error

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, Reply, StartGateway

CONCURRENCY = 50


def idem(key: str | None = None, secret: str = ADMIN_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}", "Idempotency-Key": key or secrets.token_hex(8)}


async def post(gw: GatewayHandle, path: str, body: Any, headers: dict[str, str]) -> Reply:
    return await gw.request("POST", path, json=body, headers=headers)


def refused(reply: Reply, status: int, code: str) -> dict[str, Any]:
    """``reply`` is ``status`` with ``code`` in the chat envelope (409 is not in tests.core.envelopes)."""
    if status != 409:
        return assert_error(reply, "chat", status, code)
    assert reply.status == 409, reply.text
    error: dict[str, Any] = reply.json()["error"]
    assert error["code"] == code and reply.headers["X-Service-Request-Id"].startswith("req_")
    return error


async def ledger_rows(gw: GatewayHandle, user_id: int, kind: str) -> list[Any]:
    rows: list[Any] = await gw.gateway.storage._fetch(  # type: ignore[attr-defined]
        "SELECT delta_nano, note FROM ledger WHERE user_id = ? AND kind = ?", (user_id, kind))
    return rows


async def balance(gw: GatewayHandle, user_id: int) -> float:
    return float((await gw.admin("GET", f"/admin/users/{user_id}")).json()["quota_usd"])


@pytest_asyncio.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def replicas(request: pytest.FixtureRequest, gateway_server: StartGateway,
                   make_config: MakeConfig) -> AsyncIterator[list[GatewayHandle]]:
    """One gateway on SQLite; two replicas on one fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield [await gateway_server()]
        return
    async for dsn in fresh_database("gw_idempotency"):
        config = make_config(database=dsn, redis=None)
        yield [await gateway_server(config), await gateway_server(config)]


async def test_each_mutation_replays_its_first_answer(gw: GatewayHandle) -> None:
    user_id = gw.user["id"]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/admin/users", {"name": "once", "quota_usd": 2}, ADMIN_KEY),
        (f"/admin/users/{user_id}/topup", {"amount_usd": 3}, ADMIN_KEY),
        (f"/admin/users/{user_id}/adjust", {"amount_usd": 1, "reason": "goodwill"}, ADMIN_KEY),
        ("/admin/keys", {"user_id": user_id, "name": "admin-made"}, ADMIN_KEY),
        ("/api/keys", {"name": "self-made"}, gw.user_token),
    ]
    for path, body, secret in cases:
        headers = idem(secret=secret)
        first = await post(gw, path, body, headers)
        assert first.status in (200, 201), (path, first.text)
        assert "Idempotent-Replayed" not in first.headers
        # The same object spelled differently (key order, spacing) is the same request.
        respelled = b"{ " + b", ".join(f'"{k}": {v!r}'.replace("'", '"').encode()
                                       for k, v in reversed(body.items())) + b" }"
        for again in (await post(gw, path, body, headers),
                      await gw.request("POST", path, data=respelled,
                                       headers={**headers, "Content-Type": "application/json"})):
            assert (again.status, again.body) == (first.status, first.body), path
            assert again.headers["Idempotent-Replayed"] == "true"
        other = await post(gw, path, {**body, "name": "else"} if "name" in body else
                           {**body, "amount_usd": 9}, headers)
        err = refused(other, 409, "idempotency_conflict")
        assert err["param"] == "Idempotency-Key"
    # Each moved once: one user "once", one top-up and one adjustment, one key of each name.
    users = (await gw.admin("GET", "/admin/users")).json()["data"]
    assert [u["name"] for u in users].count("once") == 1
    assert len(await ledger_rows(gw, user_id, "adjust")) == 1
    assert await balance(gw, user_id) == pytest.approx(100 + 3 + 1)
    keys = (await gw.admin("GET", f"/admin/keys?user_id={user_id}")).json()["data"]
    assert sorted(k["name"] for k in keys) == ["admin-made", "self-made", "test"]
    # The key shown once is replayed to its caller, yet kept only sealed in the database.
    new_key = (await post(gw, "/api/keys", {"name": "sealed"}, idem("seal-1", gw.user_token))).json()["key"]
    replayed = await post(gw, "/api/keys", {"name": "sealed"}, idem("seal-1", gw.user_token))
    assert replayed.json()["key"] == new_key
    rows = await gw.gateway.storage._fetch("SELECT answer FROM idempotency_keys")  # type: ignore[attr-defined]
    assert rows and not any(new_key in r["answer"] or new_key[3:20] in r["answer"] for r in rows)


async def test_keys_belong_to_their_credential(gw: GatewayHandle) -> None:
    other = await gw.create_user("other", quota_usd=1)
    body = {"name": "mine"}
    shared = "same-key-for-both"
    a = await post(gw, "/api/keys", body, idem(shared, gw.user_token))
    b = await post(gw, "/api/keys", body, idem(shared, other["user_token"]))
    assert a.status == b.status == 201 and a.json()["id"] != b.json()["id"]
    assert "Idempotent-Replayed" not in b.headers


async def test_a_refusal_frees_the_key_and_bad_keys_are_refused(gw: GatewayHandle) -> None:
    user_id = gw.user["id"]
    path = f"/admin/users/{user_id}/adjust"
    headers = idem("lower-by-150")
    body = {"amount_usd": -150, "reason": "too much"}
    refused(await post(gw, path, body, headers), 400, "balance_below_zero")
    assert (await post(gw, path, {"amount_usd": 100, "reason": "top"}, idem())).status == 200
    lowered = await post(gw, path, body, headers)  # the refused first try changed nothing
    assert lowered.status == 200 and "Idempotent-Replayed" not in lowered.headers
    assert await balance(gw, user_id) == pytest.approx(50)
    for bad in ("", "x" * 256, "tab\there", "é"):
        reply = await gw.request("POST", path, data=b'{"amount_usd": 1, "reason": "r"}',
                                 headers={"Authorization": f"Bearer {ADMIN_KEY}", "Idempotency-Key": bad,
                                          "Content-Type": "application/json"})
        assert refused(reply, 400, "invalid_request")["param"] == "Idempotency-Key"
    # A wrong credential is the usual 401, whatever the header.
    wrong = await post(gw, path, {"amount_usd": 1, "reason": "r"}, idem(secret="wrong"))
    refused(wrong, 401, "invalid_api_key")
    assert await balance(gw, user_id) == pytest.approx(50)


async def _storm(replicas: list[GatewayHandle], path: str, body: Any, headers: dict[str, str]) -> list[Reply]:
    return list(await asyncio.gather(*(post(replicas[i % len(replicas)], path, body, headers)
                                       for i in range(CONCURRENCY))))


def _one_effect(replies: list[Reply], status: int) -> bytes:
    served = [r for r in replies if r.status == status]
    fresh = [r for r in served if "Idempotent-Replayed" not in r.headers]
    assert len(fresh) == 1, [(r.status, r.text) for r in replies if r not in served]
    for r in replies:
        if r.status == 409:
            assert r.json()["error"]["code"] == "idempotency_in_progress"
        else:
            assert r.status == status and r.body == fresh[0].body
    return fresh[0].body


async def test_fifty_concurrent_duplicates_apply_once(replicas: list[GatewayHandle]) -> None:
    gw = replicas[0]
    user = await gw.create_user("storm", quota_usd=10)
    replies = await _storm(replicas, f"/admin/users/{user['id']}/adjust",
                           {"amount_usd": 1, "reason": "double click"}, idem())
    _one_effect(replies, 200)
    assert [r["delta_nano"] for r in await ledger_rows(gw, user["id"], "adjust")] == [1_000_000_000]
    assert await balance(gw, user["id"]) == pytest.approx(11)

    replies = await _storm(replicas, f"/admin/users/{user['id']}/topup", {"amount_usd": 2}, idem())
    _one_effect(replies, 200)
    assert await balance(gw, user["id"]) == pytest.approx(13)

    made = await _storm(replicas, "/admin/keys", {"user_id": user["id"], "name": "k"}, idem())
    body = _one_effect(made, 201)
    assert b'"key":"sk-' in body
    _one_effect(await _storm(replicas, "/api/keys", {"name": "own"}, idem(secret=user["user_token"])), 201)
    keys = (await gw.admin("GET", f"/admin/keys?user_id={user['id']}")).json()["data"]
    assert sorted(k["name"] for k in keys) == ["k", "own"]

    _one_effect(await _storm(replicas, "/admin/users", {"name": "born-once"}, idem()), 201)
    users = (await gw.admin("GET", "/admin/users")).json()["data"]
    assert [u["name"] for u in users].count("born-once") == 1
