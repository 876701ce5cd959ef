"""Soft limits (spec 2.10, CONTRACT 4b): crossing a key's or a user's ``soft_limit_usd`` fires
``gateway_soft_limit_reached`` once per crossing, with a warning log line and a metric; the
subscription endpoint shows the threshold (the hard limit when none is set)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import pytest

from gateway.hooks.specs import hookimpl
from gateway.storage.base import Storage
from gateway.storage.rows import KeyChanges, SoftLimitCrossing

if TYPE_CHECKING:
    from gateway.storage.testing import NewPrincipal
    from tests.conftest import GatewayHandle, StartGateway

CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 5}
TINY_USD = 0.000001  # one call of sim-chat costs more than this


class Alerts:
    """A test plugin: every soft-limit crossing announced."""

    def __init__(self) -> None:
        self.seen: list[SoftLimitCrossing] = []

    @hookimpl
    def gateway_soft_limit_reached(self, gateway: Any, crossing: SoftLimitCrossing) -> None:
        self.seen.append(crossing)

    async def wait_for(self, count: int, timeout_s: float = 3.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while len(self.seen) < count:
            assert asyncio.get_running_loop().time() < deadline, self.seen
            await asyncio.sleep(0.01)


async def settle(handle: GatewayHandle) -> None:
    """The checks run after settlement; give them the time of a flush and a query."""
    await handle.gateway.meter.flush()
    await asyncio.sleep(0.2)


async def call(handle: GatewayHandle, key: str) -> None:
    reply = await handle.request("POST", "/v1/chat/completions", json=CHAT, key=key)
    assert reply.status == 200, reply.text


async def test_key_soft_limit_fires_once_per_crossing(gateway_server: StartGateway,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    alerts = Alerts()
    gw = await gateway_server(extra_plugins=[alerts])
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], soft_limit_usd=TINY_USD)
    assert key["soft_limit_usd"] == TINY_USD
    with caplog.at_level(logging.WARNING, logger="gateway.accounts.softlimit"):
        await call(gw, key["key"])
        await alerts.wait_for(1)
    crossing = alerts.seen[0]
    assert crossing.scope == "key" and crossing.key_id == key["id"] and crossing.user_id == user["id"]
    assert crossing.soft_limit_nano == 1000 and crossing.spent_nano >= 1000
    assert any("soft limit reached: key" in r.getMessage() for r in caplog.records)
    for _ in range(3):  # still above it: no new crossing
        await call(gw, key["key"])
    await settle(gw)
    assert len(alerts.seen) == 1
    metrics = (await gw.request("GET", "/metrics")).text
    assert 'gateway_soft_limit_reached_total{scope="key"} 1' in metrics
    # A new threshold is a new crossing once it is reached.
    spent = (await gw.gateway.storage.get_key(key["id"]))
    assert spent is not None
    raised = (spent.spent_nano + 1) / 1e9
    assert (await gw.admin("PATCH", f"/admin/keys/{key['id']}", {"soft_limit_usd": raised})).status == 200
    await call(gw, key["key"])
    await alerts.wait_for(2)
    assert alerts.seen[1].soft_limit_nano == spent.spent_nano + 1


async def test_user_soft_limit_and_subscription(gateway_server: StartGateway) -> None:
    alerts = Alerts()
    gw = await gateway_server(extra_plugins=[alerts])
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"])
    sub = (await gw.request("GET", "/v1/dashboard/billing/subscription", key=key["key"])).json()
    assert sub["soft_limit_usd"] == sub["hard_limit_usd"] == 10  # no threshold: the hard limit
    patched = await gw.admin("PATCH", f"/admin/users/{user['id']}", {"soft_limit_usd": 2.5})
    assert patched.status == 200 and patched.json()["soft_limit_usd"] == 2.5
    await asyncio.sleep(0.05)
    sub = (await gw.request("GET", "/v1/dashboard/billing/subscription", key=key["key"])).json()
    assert sub["soft_limit_usd"] == 2.5 and sub["hard_limit_usd"] == 10
    await gw.admin("PATCH", f"/admin/users/{user['id']}", {"soft_limit_usd": TINY_USD})
    await call(gw, key["key"])
    await alerts.wait_for(1)
    assert [(c.scope, c.user_id, c.key_id) for c in alerts.seen] == [("user", user["id"], None)]
    # A key with its own ceiling shows its own threshold, defaulting to that ceiling.
    capped = await gw.create_key(user["id"], quota_usd=3)
    sub = (await gw.request("GET", "/v1/dashboard/billing/subscription", key=capped["key"])).json()
    assert sub["soft_limit_usd"] == sub["hard_limit_usd"] == 3
    await gw.admin("PATCH", f"/admin/keys/{capped['id']}", {"soft_limit_usd": 1.25})
    await asyncio.sleep(0.05)
    sub = (await gw.request("GET", "/v1/dashboard/billing/subscription", key=capped["key"])).json()
    assert sub["soft_limit_usd"] == 1.25
    cleared = await gw.admin("PATCH", f"/admin/keys/{capped['id']}", {"soft_limit_usd": None})
    assert cleared.json()["soft_limit_usd"] is None


@pytest.mark.parametrize("body", [{"soft_limit_usd": -1}, {"soft_limit_usd": "1"}])
async def test_bad_soft_limit_is_400(gw: GatewayHandle, body: dict[str, Any]) -> None:
    for path in (f"/admin/keys/{gw.key_record['id']}", f"/admin/users/{gw.user['id']}"):
        reply = await gw.admin("PATCH", path, body)
        assert reply.status == 400 and "soft_limit_usd" in reply.text, reply.text


async def test_claim_is_once_under_concurrency(storage: Storage, new_principal: NewPrincipal) -> None:
    """On SQLite and PostgreSQL: ten processes asking at once, one gets the crossing."""
    principal = await new_principal(1_000_000)
    await storage.update_key(principal.key.id, KeyChanges(soft_limit_nano=0))  # spent 0 >= 0
    answers = await asyncio.gather(*(storage.claim_soft_limit_crossings(principal.user.id, principal.key.id)
                                     for _ in range(10)))
    found = [c for answer in answers for c in answer]
    assert [(c.scope, c.soft_limit_nano) for c in found] == [("key", 0)]
    assert await storage.claim_soft_limit_crossings(principal.user.id, principal.key.id) == []
    await storage.update_key(principal.key.id, KeyChanges(soft_limit_nano=None))
    assert await storage.claim_soft_limit_crossings(principal.user.id, principal.key.id) == []
