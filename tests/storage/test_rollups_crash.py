"""The roll-ups never miss or double count a row, whatever crashes: ``gateway serve`` killed with
SIGKILL in the middle of a stream of calls, streams and refusals, then restarted (its orphaned holds
released as ``crash_released`` rows, which roll up too) and called again; on SQLite and PostgreSQL
the roll-ups equal the sums of the raw rows afterwards. They are written in the transactions that
write the rows, so a batch is either in both or in neither."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.storage import open_storage
from gateway.storage.sql_common import SqlStorage
from tests.serving import free_port, spawn, stop, wait_healthy
from tests.storage.test_usage_rollups import _assert_rollups_match

ADMIN = "admin-rollup-crash"
CALLERS = 12


async def _serve(config: Path, base_url: str, log_name: str) -> asyncio.subprocess.Process:
    log_path = config.parent / log_name
    proc = await spawn(config, log_path)
    try:
        await wait_healthy(proc, base_url, log_path)
    except AssertionError:
        await stop(proc)
        raise
    return proc


async def _call_forever(session: aiohttp.ClientSession, base_url: str, key: str, n: int) -> None:
    bodies = [{"model": "sim-chat", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]},
              {"model": "sim-chat", "stream": True,
               "messages": [{"role": "user", "content": "sim:tokens=40 go"}]},
              {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}]
    i = n
    while True:
        headers = {"Authorization": f"Bearer {key if i % 5 else 'sk-' + 'w' * 40}"}
        with contextlib.suppress(aiohttp.ClientError):
            async with session.post(base_url + "/v1/chat/completions", json=bodies[i % 3],
                                    headers=headers) as resp:
                await resp.read()
        i += 1


@pytest.mark.slow
async def test_rollups_survive_sigkill_and_restart(tmp_path: Path, simulator: Any, database_url: str) -> None:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    config = tmp_path / "gateway.yaml"
    config.write_text(orjson.dumps({
        "listen": {"host": "127.0.0.1", "port": port}, "database": database_url, "admin_key": ADMIN,
        "simulator": {"enabled": False}, "logging": {"access_log": False, "level": "WARNING"},
        "metering": {"heartbeat_s": 0.5, "stale_after_s": 2.0},
        "models": [{"id": "sim-chat", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}}],
        "upstreams": [{"name": "sim-slow", "protocol": "chat", "base_url": simulator.base_url,
                       "api_key": "sk-sim-tok5", "models": ["sim-chat"]}]}).decode())
    admin = {"Authorization": f"Bearer {ADMIN}"}
    for round_ in (1, 2):
        proc = await _serve(config, base_url, f"serve-{round_}.log")
        try:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
                async with session.post(base_url + "/admin/users", headers=admin,
                                        json={"name": f"crash-{round_}", "quota_usd": 50}) as resp:
                    user = await resp.json()
                async with session.post(base_url + "/admin/keys", headers=admin,
                                        json={"user_id": user["id"]}) as resp:
                    key = (await resp.json())["key"]
                callers = [asyncio.create_task(_call_forever(session, base_url, key, n))
                           for n in range(CALLERS)]
                await asyncio.sleep(2.0)
                if round_ == 1:
                    proc.send_signal(signal.SIGKILL)  # mid-batch: calls in flight, settlements queued
                    await proc.wait()
                for caller in callers:
                    caller.cancel()
                await asyncio.gather(*callers, return_exceptions=True)
        finally:
            await stop(proc)  # the second round stops gracefully: everything queued is written
    storage = open_storage(database_url)
    await storage.open()
    try:
        assert isinstance(storage, SqlStorage)
        deadline = time.monotonic() + 10
        while await storage.open_reservations():  # the second process released the first's holds
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        rows = await _assert_rollups_match(storage)
        assert rows > 50
        outcomes = {r["outcome"] for r in await storage._fetch("SELECT DISTINCT outcome FROM request_logs")}
        assert {"success", "client_error"} <= outcomes
        assert await storage.audit() == []
    finally:
        await storage.close()
