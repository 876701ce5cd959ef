"""The cache's two hooks as a third-party cache sees them (``gateway.hooks.specs``): a plugin that
answers ``gateway_cache_lookup`` before the built-in one is the cache; ``gateway_cache_store`` hands
it the canonical answer of a complete call, and a kept answer it gives back is served as a hit in
the client's family, with no upstream call."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import openai
from starlette.requests import Request

from gateway.api import ClientCall, hookimpl
from gateway.api.accounts import Principal
from gateway.api.canonical import ChatResponse
from gateway.api.relay import CacheLookup, KeptAnswer

from .conftest import cache_models, cache_upstreams, nonce, upstream_calls

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway


class DictCache:
    """An in-memory cache keyed by user, family, model and body."""

    def __init__(self) -> None:
        self.kept: dict[str, KeptAnswer] = {}
        self.stored: list[tuple[str, int, str]] = []

    @hookimpl(tryfirst=True)
    async def gateway_cache_lookup(
        self, gateway: Any, request: Request, principal: Principal, call: ClientCall, family: str
    ) -> CacheLookup:
        key = f"{principal.user.id}:{family}:{call.view.model}:{hash(call.body)}"
        return CacheLookup(key=key, hit=self.kept.get(key))

    @hookimpl
    def gateway_cache_store(
        self, gateway: Any, lookup: CacheLookup, user_id: int, response: ChatResponse
    ) -> None:
        self.kept[lookup.key] = KeptAnswer(response=response, user_id=user_id, created_at=time.time())
        self.stored.append((lookup.key, user_id, response.model))


async def test_a_plugin_cache_keeps_and_serves(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    plugin = DictCache()
    config = make_config(extra_models=cache_models(), extra_upstreams=cache_upstreams(simulator.base_url),
                         routing={"max_attempts": 1, "cooldown_s": 0.001})
    gw: GatewayHandle = await gateway_server(config, extra_plugins=[plugin])
    user = await gw.create_user()
    key = (await gw.create_key(user["id"]))["key"]
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
    prompt = nonce()
    messages: Any = [{"role": "user", "content": prompt}]
    first = await client.chat.completions.with_raw_response.create(model="c-chat", messages=messages)
    assert first.headers["x-gateway-cache"] == "miss"
    assert [(k.split(":")[0], uid) for k, uid, _ in plugin.stored] == [(str(user["id"]), user["id"])]
    second = await client.chat.completions.with_raw_response.create(model="c-chat", messages=messages)
    assert second.headers["x-gateway-cache"] == "hit"
    assert second.parse().choices[0].message.content == first.parse().choices[0].message.content
    assert await upstream_calls(simulator.base_url, prompt) == 1
