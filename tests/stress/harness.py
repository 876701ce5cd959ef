"""Shared by the stress scripts: a gateway (``runner.py``) and the simulator, each its own process,
on a fresh SQLite database, with a user and key; RSS sampling; percentiles."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

ROOT = Path(__file__).resolve().parents[2]
ADMIN_KEY = "admin-stress-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Served:
    base_url: str
    pid: int
    key: str
    user_id: int
    log_path: Path

    async def stats(self, session: aiohttp.ClientSession) -> dict[str, int]:
        async with session.get(self.base_url + "/_stress/stats") as resp:
            data: dict[str, int] = orjson.loads(await resp.read())
            return data


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


async def _wait(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as resp:
                    if resp.status < 500:
                        return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{what} did not start")


def _spawn(args: list[str], log_path: Path | None) -> subprocess.Popen[bytes]:
    """A Python child of this checkout (its output to ``log_path``, or nowhere)."""
    if log_path is None:
        return subprocess.Popen([sys.executable, *args], env=_env(), cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with log_path.open("wb") as log:
        return subprocess.Popen([sys.executable, *args], env=_env(), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT)


@contextlib.asynccontextmanager
async def gateway(*, limits: dict[str, Any] | None = None, token_ms: float = 0,
                  log_level: str = "WARNING") -> AsyncIterator[Served]:
    """The full ``config/gateway.yaml`` catalogue against a simulator child, on a temp database."""
    with tempfile.TemporaryDirectory(prefix="gateway-stress-") as tmp:
        folder = Path(tmp)
        sim_port, port = free_port(), free_port()
        raw = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
        raw.update({"database": f"sqlite:///{folder / 'gateway.db'}", "admin_key": ADMIN_KEY,
                    "simulator": {"enabled": False, "port": sim_port},
                    "logging": {"access_log": log_level == "INFO", "level": log_level}})
        raw.setdefault("tasks", {}).update({"poll_first_s": 0.2, "poll_interval_s": 0.3})
        if limits:
            raw.setdefault("limits", {}).update(limits)
        config_path = folder / "gateway.json"
        config_path.write_bytes(orjson.dumps(raw))
        log_path = folder / "gateway.log"
        sim = _spawn(["-m", "gateway", "simulator", "--port", str(sim_port), "--token-ms", str(token_ms)],
                     None)
        gw = _spawn(["-m", "tests.stress.runner", str(config_path), str(port)], log_path)
        try:
            base = f"http://127.0.0.1:{port}"
            await _wait(f"http://127.0.0.1:{sim_port}/", sim, "the simulator")
            await _wait(base + "/healthz", gw, "the gateway")
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as admin:
                new_user = {"name": "stress", "quota_usd": 100000}
                async with admin.post(base + "/admin/users", json=new_user) as r:
                    user = orjson.loads(await r.read())
                async with admin.post(base + "/admin/keys", json={"user_id": user["id"], "name": "s"}) as r:
                    key = orjson.loads(await r.read())["key"]
                async with admin.get(base + "/_stress/stats") as r:
                    serving_pid = orjson.loads(await r.read())["pid"]  # granian's worker, not gw
            yield Served(base, serving_pid, key, user["id"], log_path)
        finally:
            for proc in (gw, sim):
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
