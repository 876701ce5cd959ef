"""``gateway serve`` killed with SIGKILL while image tasks are running: the holds belong to the
tasks, not to the dead process, so the restarted gateway's orphan sweeper leaves them alone; the
new process finishes the tasks, charges the ones that succeed and refunds the ones that fail, once
each, and the books stay clean."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from gateway.storage import open_storage
from gateway.storage.rows import DURABLE_HOLDER
from tests.serving import free_port, spawn, stop, wait_healthy
from tests.tasks.helpers import PRICE_NANO, PRICE_USD

ADMIN = "admin-task-crash"
METERING = {"heartbeat_s": 0.2, "stale_after_s": 0.6}


def _write_config(tmp_path: Path, sim_url: str) -> tuple[Path, str, str]:
    port = free_port()
    database = f"sqlite:///{tmp_path}/tasks.db"
    config = {
        "listen": {"host": "127.0.0.1", "port": port}, "database": database, "admin_key": ADMIN,
        "simulator": {"enabled": False}, "logging": {"access_log": False, "level": "WARNING"},
        "metering": METERING,
        "tasks": {"poll_first_s": 0.1, "poll_interval_s": 0.1, "timeout_s": 60},
        "models": [{"id": "img", "owned_by": "simulator", "price": {"per_task": PRICE_USD}}],
        "upstreams": [{"name": "sim-image", "protocol": "imagetask", "base_url": sim_url,
                       "api_key": "sk-sim-dur2500", "models": ["img"]}],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(orjson.dumps(config).decode())
    return path, f"http://127.0.0.1:{port}", database


async def _serve(config: Path, base_url: str, log_name: str) -> asyncio.subprocess.Process:
    log_path = config.parent / log_name
    proc = await spawn(config, log_path)
    try:
        await wait_healthy(proc, base_url, log_path)
    except AssertionError:
        await stop(proc)
        raise
    return proc


async def _json(session: aiohttp.ClientSession, method: str, url: str, token: str, body: Any = None) -> Any:
    async with session.request(method, url, json=body, headers={"Authorization": f"Bearer {token}"}) as resp:
        assert resp.status in (200, 201), await resp.text()
        return await resp.json()


async def _wait_status(http: aiohttp.ClientSession, base_url: str, key: str, task_id: str,
                       statuses: tuple[str, ...]) -> str:
    deadline = time.monotonic() + 15
    while True:
        task = await _json(http, "GET", f"{base_url}/imagetask/task/{task_id}/fetch", key)
        if task["status"] in statuses:
            return str(task["status"])
        assert time.monotonic() < deadline, task
        await asyncio.sleep(0.05)


async def test_sigkill_in_the_middle_of_tasks(tmp_path: Path, simulator: Any) -> None:
    config, base_url, database = _write_config(tmp_path, simulator.base_url)
    first = await _serve(config, base_url, "first.log")
    async with aiohttp.ClientSession() as http:
        try:
            user = await _json(http, "POST", base_url + "/admin/users", ADMIN, {"name": "c", "quota_usd": 1})
            key = (await _json(http, "POST", base_url + "/admin/keys", ADMIN, {"user_id": user["id"]}))["key"]
            prompts = ["ok one", "ok two", "bad sim:taskfail"]
            submit = base_url + "/imagetask/submit/imagine"
            ids = [(await _json(http, "POST", submit, key, {"prompt": p}))["result"] for p in prompts]
            await _wait_status(http, base_url, key, ids[0], ("IN_PROGRESS",))
        finally:
            await stop(first, signal.SIGKILL)
        storage = open_storage(database)
        await storage.open()
        try:
            holds = await storage.open_reservations()
            assert sorted(h.instance for h in holds) == [DURABLE_HOLDER] * 3
            assert await storage.audit() == []
        finally:
            await storage.close()
        await asyncio.sleep(METERING["stale_after_s"] + 0.2)  # the dead process is long silent
        second = await _serve(config, base_url, "second.log")
        try:
            ended = ("SUCCESS", "FAILURE")
            finals = [await _wait_status(http, base_url, key, task_id, ended) for task_id in ids]
            assert finals == ["SUCCESS", "SUCCESS", "FAILURE"]
            me = await _json(http, "GET", base_url + "/admin/users", ADMIN)
        finally:
            assert await stop(second) == 0
    balance = next(u for u in me["data"] if u["id"] == user["id"])["quota_usd"]
    assert abs(balance - (1 - 2 * PRICE_USD)) < 1e-9, balance
    storage = open_storage(database)
    await storage.open()
    try:
        assert await storage.open_reservations() == []
        assert await storage.audit() == []
        stored = await storage.get_user(user["id"])
        assert stored is not None and stored.used_nano == 2 * PRICE_NANO
    finally:
        await storage.close()
