"""A user disabled or deleted through one replica is refused on another at its very next call,
without Redis and before the other replica's auth cache has heard of it (its polling is switched
off here, so only the reservation's own check can explain the refusal): the hold's transaction
checks the user as it checks the key (issue 38, point 1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import openai
import pytest
import pytest_asyncio

from gateway.accounts.auth import Authenticator
from gateway.accounts.metering.audit import run_audit
from gateway.storage.testing import fresh_database

if TYPE_CHECKING:
    from tests.conftest import MakeConfig, StartGateway

pytestmark = pytest.mark.postgres


@pytest_asyncio.fixture
async def pg_dsn() -> AsyncIterator[str]:
    async for dsn in fresh_database("gw_user_changes"):
        yield dsn


async def _chat(client: openai.AsyncOpenAI) -> None:
    await client.chat.completions.create(model="sim-chat", max_tokens=5,
                                         messages=[{"role": "user", "content": "hello"}])


@pytest.mark.parametrize("change", ["disable", "delete"])
async def test_a_user_changed_on_one_replica_is_refused_on_the_other_at_once(
        pg_dsn: str, gateway_server: StartGateway, make_config: MakeConfig,
        monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    monkeypatch.setattr(Authenticator, "poll_interval_s", 3600.0)  # B's cache never hears of it
    config = make_config(database=pg_dsn, redis=None)
    a = await gateway_server(config)
    b = await gateway_server(config)
    user = await a.create_user("changed", quota_usd=10)
    key = await a.create_key(user["id"], name="k")
    async with openai.AsyncOpenAI(base_url=b.base_url + "/v1", api_key=key["key"], max_retries=0) as on_b:
        for _ in range(3):  # B caches the key and its user, and holds from a quota lease
            await _chat(on_b)
        if change == "disable":
            reply = await a.admin("PATCH", f"/admin/users/{user['id']}", {"enabled": False})
            assert reply.status == 200, reply.text
        else:
            reply = await a.admin("DELETE", f"/admin/users/{user['id']}")
            assert reply.status in (200, 204), reply.text
        for _ in range(5):  # the very next call, and every one after it
            with pytest.raises(openai.AuthenticationError) as refused:
                await _chat(on_b)
            assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
    await b.gateway.meter.flush()
    await a.gateway.meter.flush()
    storage = a.gateway.storage
    page = await storage.log_page(user["id"], 1, 100)
    assert sum(log.status == 200 for log in page.items) == 3
    assert await run_audit(storage) == []
