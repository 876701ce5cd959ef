"""Fixtures and helpers for the task engine and the image-task family: a gateway with an ``imagetask``
upstream on the session simulator, fast timing (tasks of a few hundred milliseconds, polled every
few tens), and a user with a key; helpers to submit, wait and read balances."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.settings.config import Config
from gateway.storage.testing import database_url, pg_database
from tests.conftest import GatewayHandle, MakeConfig, Reply, StartGateway

# Fixtures re-exported for test modules (``database_url``: each test taking it runs on SQLite and
# on PostgreSQL, required with CI=true).
__all__ = ["database_url", "pg_database", "task_config", "tgw"]

IMAGE_MODEL = "imagetask-mj"
PRICE_USD = 0.05
PRICE_NANO = 50_000_000
FAST_TASKS = {"poll_first_s": 0.05, "poll_interval_s": 0.1, "timeout_s": 30, "callback_allowlist": []}


def image_upstream(base_url: str, key: str = "sk-sim-dur300-steps3", *, name: str = "sim-image",
                   models: list[str] | None = None, priority: int = 0) -> dict[str, Any]:
    return {"name": name, "protocol": "imagetask", "base_url": base_url, "api_key": key,
            "models": models or [IMAGE_MODEL], "priority": priority}


@pytest.fixture
def task_config(make_config: MakeConfig, simulator: Any) -> Callable[..., Config]:
    """``task_config(key=..., tasks={...}, upstreams=[...], database=...)``: the default test config
    plus the image model and upstream, with fast task timing."""

    def build(*, key: str = "sk-sim-dur300-steps3", tasks: Mapping[str, Any] | None = None,
              upstreams: Iterable[Mapping[str, Any]] | None = None, **overrides: Any) -> Config:
        ups = list(upstreams) if upstreams is not None else [image_upstream(simulator.base_url, key)]
        return make_config(extra_models=[{"id": IMAGE_MODEL, "owned_by": "simulator",
                                          "price": {"per_task": PRICE_USD}}],
                           extra_upstreams=ups, tasks={**FAST_TASKS, **(tasks or {})}, **overrides)

    return build


async def with_user(handle: GatewayHandle, name: str = "u", quota_usd: float = 10) -> GatewayHandle:
    handle.user = await handle.create_user(name, quota_usd=quota_usd)
    handle.key_record = await handle.create_key(handle.user["id"], name=f"{name}-key")
    return handle


@pytest_asyncio.fixture
async def tgw(gateway_server: StartGateway, task_config: Callable[..., Config]) -> GatewayHandle:
    """A gateway with the image-task upstream, user ``u`` ($10) and a key."""
    return await with_user(await gateway_server(task_config()))


async def submit(gw: GatewayHandle, kind: str, body: dict[str, Any], key: str | None = None) -> Reply:
    return await gw.request("POST", f"/imagetask/submit/{kind}", json=body, key=key or gw.key)


async def fetch(gw: GatewayHandle, task_id: str, key: str | None = None) -> Reply:
    return await gw.request("GET", f"/imagetask/task/{task_id}/fetch", key=key or gw.key)


async def wait_task(gw: GatewayHandle, task_id: str, statuses: tuple[str, ...] = ("SUCCESS", "FAILURE"),
                    timeout_s: float = 10.0, key: str | None = None) -> dict[str, Any]:
    """Fetch until the task's status is one of ``statuses``."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await fetch(gw, task_id, key)
        assert reply.status == 200, reply.text
        task = reply.json()
        if task["status"] in statuses:
            return task
        assert time.monotonic() < deadline, f"task stuck: {task}"
        await asyncio.sleep(0.02)


async def wait_stored(gw: GatewayHandle, task_id: str, pred: Callable[[Any], bool],
                      timeout_s: float = 10.0) -> Any:
    """Read the task record straight from storage (no refresh-on-fetch) until ``pred`` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        task = await gw.gateway.storage.get_task(task_id)
        if task is not None and pred(task):
            return task
        assert time.monotonic() < deadline, f"condition never met: {task}"
        await asyncio.sleep(0.02)


async def balance_nano(gw: GatewayHandle, user_id: int | None = None) -> tuple[int, int]:
    """(balance, used) of the user, in nano-USD."""
    user = await gw.gateway.storage.get_user(user_id or gw.user["id"])
    assert user is not None
    return user.balance_nano, user.used_nano


async def until(pred: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await pred():
        assert time.monotonic() < deadline, "condition never met"
        await asyncio.sleep(0.02)


def db_path(tmp_path: Path) -> Path:
    return tmp_path / "gateway.db"
