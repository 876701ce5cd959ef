"""create_app: plugin composition, lifespan order, graceful shutdown, bootstrap."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pluggy
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.accounts.records import RequestLog
from gateway.edge.app import create_app
from gateway.edge.http import json_response
from gateway.hooks.specs import hookimpl
from gateway.runtime.context import Gateway
from gateway.server.bootstrap import DemoCredentials, bootstrap
from gateway.storage import open_storage


class FakeChatAdapter:
    protocol = "chat"
    capabilities = frozenset({"generate", "embed"})

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {}


class Recorder:
    """Records the life cycle; serves a slow route; tries to shadow /healthz; replaces an adapter."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.entered = asyncio.Event()

    @hookimpl
    def gateway_startup(self, gateway: Gateway) -> Any:
        async def started() -> None:  # awaited by the app; storage is open by now
            self.events.append(("startup", await gateway.storage.count_users()))
        return started()

    @hookimpl
    def gateway_shutdown(self, gateway: Gateway) -> Any:
        async def stopping() -> None:  # in-flight requests are done; storage still open
            self.events.append(("shutdown", await gateway.storage.count_users()))
        return stopping()

    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        async def slow(request: Request) -> Response:
            self.events.append("slow-start")
            self.entered.set()
            await asyncio.sleep(0.3)
            self.events.append("slow-end")
            return json_response({"done": True})

        async def shadow(request: Request) -> Response:
            return json_response({"status": "hijacked"})

        return [Route("/slow", slow), Route("/healthz", shadow)]

    @hookimpl
    def gateway_upstream_adapters(self) -> list[Any]:
        return [FakeChatAdapter()]


async def test_lifespan_order_and_graceful_shutdown(gateway_server: Any) -> None:
    recorder = Recorder()
    gw = await gateway_server(extra_plugins=[recorder])
    assert recorder.events == [("startup", 0)]
    assert isinstance(gw.gateway.adapters["chat"], FakeChatAdapter)  # a later plugin's adapter wins
    assert {"messages", "v1beta"} <= set(gw.gateway.adapters)
    assert (await gw.request("GET", "/healthz")).json() == {"status": "ok"}  # built-in route first

    async with aiohttp.ClientSession() as other:
        async def slow_call() -> tuple[int, Any]:
            async with other.get(gw.base_url + "/slow") as resp:
                return resp.status, await resp.json()

        in_flight = asyncio.create_task(slow_call())
        await recorder.entered.wait()
        await gw.stop()  # graceful: waits for /slow, then runs the lifespan shutdown
        assert await in_flight == (200, {"done": True})
    assert recorder.events == [("startup", 0), "slow-start", "slow-end", ("shutdown", 0)]


async def test_meter_is_flushed_on_shutdown(gw: Any) -> None:
    log = RequestLog(request_id="req_" + "f" * 32, created_at=time.time(), user_id=gw.user["id"],
                     key_id=gw.key_record["id"], token_name="test", route="/v1/chat/completions",
                     family="chat", model="sim-chat", status=400, outcome="client_error")
    gw.gateway.meter.finish(log, None, 0)
    config = gw.gateway.config
    await gw.stop()
    storage = open_storage(config.database)
    await storage.open()
    try:
        page = await storage.log_page(gw.user["id"], 1, 10)
    finally:
        await storage.close()
    assert [item.request_id for item in page.items] == [log.request_id]


def test_misspelt_hook_fails_loudly(make_config: Any) -> None:
    class Typo:
        @hookimpl
        def gateway_routez(self, gateway: Gateway) -> list[BaseRoute]:
            return []

    with pytest.raises(pluggy.PluginValidationError):
        create_app(make_config(), extra_plugins=[Typo()], load_entrypoints=False)


async def test_bootstrap_only_on_an_empty_database(make_config: Any) -> None:
    config = make_config(bootstrap={"demo_user": True})  # its simulator is not the config's own
    first = await bootstrap(config)
    assert isinstance(first, DemoCredentials)
    assert first.api_key.startswith("sk-") and first.user_token.startswith("ut-")
    assert first.quota_usd == config.billing.demo_quota_usd
    assert await bootstrap(config) is None
    storage = open_storage(config.database)
    await storage.open()
    try:
        users = await storage.list_users()
        keys = await storage.list_keys()
    finally:
        await storage.close()
    assert [u.name for u in users] == ["demo"] and len(keys) == 1
    assert users[0].balance_nano == int(config.billing.demo_quota_usd * 1e9)
