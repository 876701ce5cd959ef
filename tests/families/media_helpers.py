"""Fixtures and helpers for the video-A, video-B and music families: a gateway with one upstream of
each family on the session simulator, fast task timing (tasks of a few hundred milliseconds,
polled every few tens), a user with a key, and a poll-until helper."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest
import pytest_asyncio

from gateway.settings.config import Config
from tests.conftest import GatewayHandle, MakeConfig, Reply, StartGateway
from tests.tasks.helpers import FAST_TASKS, with_user

VIDEOA_PRICE = 0.05  # USD per second
VIDEOA_PRICE_NANO = 50_000_000
VIDEOS_PRICE = 0.1
VIDEOS_PRICE_NANO = 100_000_000
MUSIC_PRICE = 0.2  # USD per task
MUSIC_PRICE_NANO = 200_000_000
VIDEOA_MODELS = ["videoa-2-5", "videoa-2-0", "videoa-2-0-fast", "videoa-2-0-mini",
                 "videoa-2-0-mini-enhanced", "videoa-1-5-pro"]

MEDIA_MODELS: list[dict[str, Any]] = [
    *({"id": m, "owned_by": "simulator", "price": {"per_second": VIDEOA_PRICE}} for m in VIDEOA_MODELS),
    {"id": "videos-standard", "owned_by": "simulator", "price": {"per_second": VIDEOS_PRICE}},
    {"id": "videos-pro", "owned_by": "simulator", "price": {"per_second": 0.3}},
    {"id": "music_v4", "owned_by": "simulator", "price": {"per_task": MUSIC_PRICE}},
    {"id": "music_v3.5", "owned_by": "simulator", "price": {"per_task": 0.1}},
]


def media_upstreams(base_url: str, key: str = "sk-sim-dur300") -> list[dict[str, Any]]:
    return [
        {"name": "sim-videoa", "protocol": "videoa", "base_url": base_url, "api_key": key,
         "models": VIDEOA_MODELS},
        {"name": "sim-videos", "protocol": "videos", "base_url": base_url, "api_key": key,
         "models": ["videos-standard", "videos-pro"]},
        {"name": "sim-music", "protocol": "music", "base_url": base_url, "api_key": key,
         "models": ["music_v4", "music_v3.5"]},
    ]


@pytest.fixture
def media_config(make_config: MakeConfig, simulator: Any) -> Callable[..., Config]:
    """``media_config(key=..., tasks={...}, upstreams=[...], **overrides)``."""

    def build(*, key: str = "sk-sim-dur300", tasks: Mapping[str, Any] | None = None,
              upstreams: Iterable[Mapping[str, Any]] | None = None, **overrides: Any) -> Config:
        ups = list(upstreams) if upstreams is not None else media_upstreams(simulator.base_url, key)
        return make_config(extra_models=MEDIA_MODELS, extra_upstreams=ups,
                           tasks={**FAST_TASKS, **(tasks or {})}, **overrides)

    return build


@pytest_asyncio.fixture
async def mgw(gateway_server: StartGateway, media_config: Callable[..., Config]) -> GatewayHandle:
    """A gateway with the three media upstreams, user ``u`` ($10) and a key."""
    return await with_user(await gateway_server(media_config()))


async def poll(gw: GatewayHandle, path: str, done: Callable[[Any], bool], *, key: str | None = None,
               timeout_s: float = 10.0) -> Any:
    """GET ``path`` until ``done(json)``."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await gw.request("GET", path, key=key or gw.key)
        assert reply.status == 200, reply.text
        body = reply.json()
        if done(body):
            return body
        assert time.monotonic() < deadline, f"never done: {body}"
        await asyncio.sleep(0.02)


async def ledger_kinds(gw: GatewayHandle, request_id: str) -> list[str]:
    storage: Any = gw.gateway.storage
    rows = await storage._fetch("SELECT kind FROM ledger WHERE request_id = ? ORDER BY id", (request_id,))
    return [r["kind"] for r in rows]


def error_of(reply: Reply) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"error"}, body
    err: dict[str, Any] = body["error"]
    return err
