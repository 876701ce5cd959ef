"""``gateway serve`` killed with SIGKILL in the middle of ~50 streamed calls: after a restart the
orphan sweeper releases every reservation the dead process held (logged ``crash_released``,
charged nothing), ``gateway audit`` exits 0 and no reservation stays open.

The sweeper releases the holds of processes silent for ``metering.stale_after_s``, set short here
(2 s) so that the wait stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from gateway.storage import open_storage
from gateway.storage.base import Storage
from tests.serving import free_port, serve_env, spawn, stop, wait_healthy

ADMIN = "admin-crash-test"
STREAMS = 50
SWEEP_TIMEOUT_S = 10.0  # stale_after_s (2) + a sweep period (1) + heartbeat period (0.5) + slack





def _write_config(tmp_path: Path, sim_url: str) -> tuple[Path, str, str]:
    port = free_port()
    database = f"sqlite:///{tmp_path}/crash.db"
    config = {
        "listen": {"host": "127.0.0.1", "port": port},
        "database": database,
        "admin_key": ADMIN,
        "simulator": {"enabled": False},
        "logging": {"access_log": False, "level": "WARNING"},
        "metering": {"heartbeat_s": 0.5, "stale_after_s": 2.0},
        "models": [{"id": "sim-chat", "owned_by": "simulator",
                    "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}}],
        # 20 ms between tokens: a 200-token answer streams for 4 s.
        "upstreams": [{"name": "sim-slow", "protocol": "chat", "base_url": sim_url,
                       "api_key": "sk-sim-tok20", "models": ["sim-chat"]}],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(orjson.dumps(config).decode())  # JSON is YAML
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


async def _with_storage(database: str) -> Storage:
    storage = open_storage(database)
    await storage.open()
    return storage


async def _admin(session: aiohttp.ClientSession, base_url: str, path: str, body: dict[str, Any]) -> Any:
    async with session.post(base_url + path, json=body, headers={"Authorization": f"Bearer {ADMIN}"}) as resp:
        assert resp.status == 201, await resp.text()
        return await resp.json()


async def _stream_until_killed(session: aiohttp.ClientSession, base_url: str, key: str,
                               started: asyncio.Queue[str]) -> None:
    body = {"model": "sim-chat", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "sim:tokens=200 keep going"}]}
    async with session.post(base_url + "/v1/chat/completions", json=body,
                            headers={"Authorization": f"Bearer {key}"}) as resp:
        assert resp.status == 200, await resp.text()
        first = await resp.content.readany()
        assert first.startswith(b"data: ")
        await started.put(resp.headers["X-Service-Request-Id"])
        with contextlib.suppress(aiohttp.ClientError):
            while await resp.content.readany():
                pass


@pytest.mark.slow
async def test_sigkill_mid_stream_then_restart_releases_reservations(tmp_path: Path, simulator: Any) -> None:
    config, base_url, database = _write_config(tmp_path, simulator.base_url)
    proc = await _serve(config, base_url, "serve-1.log")
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            user = await _admin(session, base_url, "/admin/users", {"name": "crash", "quota_usd": 10})
            key = (await _admin(session, base_url, "/admin/keys", {"user_id": user["id"]}))["key"]
            started: asyncio.Queue[str] = asyncio.Queue()
            streams = [asyncio.create_task(_stream_until_killed(session, base_url, key, started))
                       for _ in range(STREAMS)]
            in_flight = [await asyncio.wait_for(started.get(), 10) for _ in range(STREAMS)]
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            await asyncio.gather(*streams, return_exceptions=True)
    finally:
        await stop(proc, signal.SIGKILL)

    # The dead process left its holds behind, and the user's balance is short by them.
    storage = await _with_storage(database)
    try:
        held = await storage.open_reservations()
        assert {r.request_id for r in held} == set(in_flight)
        before = await storage.get_user(user["id"])
        assert before is not None and before.balance_nano < 10 * 10**9
    finally:
        await storage.close()

    proc = await _serve(config, base_url, "serve-2.log")
    try:
        storage = await _with_storage(database)
        try:
            deadline = time.monotonic() + SWEEP_TIMEOUT_S
            while await storage.open_reservations():
                assert time.monotonic() < deadline, "the orphan sweeper did not release the reservations"
                await asyncio.sleep(0.25)
            user_after = await storage.get_user(user["id"])
            assert user_after is not None
            assert user_after.balance_nano == 10 * 10**9  # every hold came back; nothing was charged
            assert user_after.used_nano == 0
            page = await storage.log_page(user["id"], 1, 100)
            assert page.total == STREAMS
            assert {log.request_id for log in page.items} == set(in_flight)
            assert {log.outcome for log in page.items} == {"crash_released"}
            assert all(log.charge_nano == 0 for log in page.items)
        finally:
            await storage.close()
    finally:
        await stop(proc)

    audit = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "audit", "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=tmp_path, env=serve_env())
    output, _ = await asyncio.wait_for(audit.communicate(), 30)
    assert audit.returncode == 0, output.decode(errors="replace")
    storage = await _with_storage(database)
    try:
        assert await storage.open_reservations() == []
        assert await storage.audit() == []
    finally:
        await storage.close()
