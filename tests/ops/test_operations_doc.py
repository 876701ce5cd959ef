"""docs/operations.md, "Running it in production", followed as an operator would (issue 34 point 7):
each block marked ```sh test:NAME``` runs as written, under bash with ``-euo pipefail``, against a
gateway started here (``gateway serve`` in a child process, SQLite); the PostgreSQL blocks against
a database of their own; the systemd unit passes ``systemd-analyze verify`` (where installed) and its
``ExecStart`` serves. A block marked in the page and run by no test fails the first test."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from tests.serving import free_port, serve_env, spawn, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations.md"
ADMIN_KEY = "admin-ops-doc"
_BLOCK = re.compile(r"^```(\w+) test:([\w-]+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUN_HERE = {"check", "systemd", "sqlite-backup", "sqlite-restore", "pg-backup", "pg-restore",
            "rotate-user-key", "logs", "observe"}


def doc_blocks() -> dict[str, str]:
    """Each tested block of the page by name."""
    found: dict[str, str] = {}
    for match in _BLOCK.finditer(DOC.read_text()):
        assert match.group(2) not in found, f"two blocks named {match.group(2)}"
        found[match.group(2)] = match.group(3)
    return found


def run_block(name: str, env: dict[str, str], cwd: Path) -> str:
    """The block's stdout; AssertionError with its output unless it exits 0."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", doc_blocks()[name]], cwd=cwd, text=True,
                            capture_output=True, timeout=120, check=False,
                            env={**serve_env(), **env, "PATH": path})
    assert result.returncode == 0, f"block {name} exit {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _verify(unit_path: Path) -> None:
    verify = subprocess.run(["systemd-analyze", "verify", str(unit_path)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert verify.returncode == 0 and "gateway.service" not in verify.stderr, verify.stderr


def _read(path: Path) -> str:
    return path.read_text(errors="replace")


def _cli(*args: str, cwd: Path) -> Any:
    result = subprocess.run([sys.executable, "-m", "gateway", *args, "--json"], cwd=cwd, text=True,
                            capture_output=True, timeout=60, check=False, env=serve_env())
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_tested_block_is_run_here() -> None:
    assert set(doc_blocks()) == RUN_HERE


@dataclass
class Running:
    config: Path
    db: Path
    url: str
    log: Path
    proc: asyncio.subprocess.Process | None
    tmp: Path

    def env(self, **more: str) -> dict[str, str]:
        backups = self.tmp / "backups"
        backups.mkdir(exist_ok=True)
        return {"CONFIG": str(self.config), "DB": str(self.db), "GATEWAY": self.url, "BACKUPS": str(backups),
                "LOG": str(self.log), **more}

    async def start(self) -> None:
        self.proc = await spawn(self.config, self.log)
        await wait_healthy(self.proc, self.url, self.log)

    async def stop(self) -> None:
        if self.proc is not None:
            assert await stop(self.proc) == 0
            self.proc = None


def _config(tmp_path: Path, port: int, database: str) -> Path:
    raw = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
    raw.update(listen={"host": "127.0.0.1", "port": port}, database=database, admin_key=ADMIN_KEY,
               simulator={"enabled": True, "port": free_port()})
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest_asyncio.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    port = free_port()
    db = tmp_path / "data" / "gateway.db"
    gateway = Running(_config(tmp_path, port, f"sqlite:///{db}"), db, f"http://127.0.0.1:{port}",
                      tmp_path / "gateway.log", None, tmp_path)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop()


def _session() -> aiohttp.ClientSession:
    """No keep-alive: the CLI blocks take seconds, and the server closes a connection idle for
    limits.header_timeout_s, which a reused one would meet as a disconnect."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True))


async def _admin(http: aiohttp.ClientSession, gateway: Running, method: str, path: str,
                 body: dict[str, Any] | None = None) -> Any:
    async with http.request(method, gateway.url + path, json=body,
                            headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as resp:
        assert resp.status < 300, await resp.text()
        return await resp.json()


async def _chat(http: aiohttp.ClientSession, gateway: Running, key: str) -> int:
    body = {"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}]}
    async with http.post(gateway.url + "/v1/chat/completions", json=body,
                         headers={"Authorization": f"Bearer {key}"}) as resp:
        await resp.read()
        return resp.status


async def test_check_logs_observe_backup_restore_and_key_rotation_on_sqlite(running: Running) -> None:
    assert "OK" in run_block("check", running.env(), running.tmp)
    async with _session() as http:
        alice = await _admin(http, running, "POST", "/admin/users", {"name": "alice", "quota_usd": 5})
        key = await _admin(http, running, "POST", "/admin/keys", {"user_id": alice["id"]})
        assert await _chat(http, running, key["key"]) == 200
        assert await _chat(http, running, "sk-not-a-key-of-anyone-at-all") == 401
        await asyncio.sleep(0.5)  # the access line and the refusal row are written after the answer
        refusals = run_block("logs", running.env(), running.tmp).splitlines()
        assert any('"status":401' in line and '"error_code":"invalid_api_key"' in line for line in refusals)
        observed = run_block("observe", running.env(), running.tmp)
        assert '"status":"ready"' in observed.replace(" ", "") and "gateway_http_requests_total" in observed

        run_block("sqlite-backup", running.env(), running.tmp)
        await _admin(http, running, "POST", "/admin/users", {"name": "bob-after-the-backup"})
    await running.stop()
    run_block("sqlite-restore", running.env(), running.tmp)  # with the gateway stopped
    await running.start()
    async with _session() as http:
        names = {u["name"] for u in (await _admin(http, running, "GET", "/admin/users"))["data"]}
        assert "alice" in names and "bob-after-the-backup" not in names
        assert await _chat(http, running, key["key"]) == 200  # the restored key still works

        out = run_block("rotate-user-key", running.env(USER_ID=str(alice["id"]), OLD_KEY_ID=str(key["id"])),
                        running.tmp)
        new_key = re.search(r"key=(sk-\S+)", out)
        assert new_key is not None, out
        assert await _chat(http, running, new_key.group(1)) == 200
        for _ in range(40):  # the CLI's change reaches the running gateway within a second
            if await _chat(http, running, key["key"]) == 401:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the deleted key is still served")


@pytest_asyncio.fixture
async def pg_url() -> AsyncIterator[str]:
    from gateway.storage.testing import fresh_database

    async for dsn in fresh_database("gw_opsdoc"):
        yield dsn


async def test_postgresql_backup_and_restore(tmp_path: Path, pg_url: str) -> None:
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("pg_dump and pg_restore are needed on CI")
        pytest.skip("pg_dump / pg_restore are not installed")
    config = _config(tmp_path, free_port(), pg_url + "?pool_max=4")
    (tmp_path / "backups").mkdir()
    env = {"PG_URL": pg_url, "BACKUPS": str(tmp_path / "backups"), "CONFIG": str(config)}
    _cli("users", "create", "--name", "before", "--config", str(config), cwd=tmp_path)  # migrates, too
    run_block("pg-backup", env, tmp_path)
    _cli("users", "create", "--name", "after", "--config", str(config), cwd=tmp_path)
    run_block("pg-restore", env, tmp_path)
    names = {u["name"] for u in _cli("users", "list", "--config", str(config), cwd=tmp_path)["data"]}
    assert names == {"before"}


async def test_the_systemd_unit_verifies_and_its_exec_start_serves(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, f"sqlite:///{tmp_path}/data/gateway.db")
    (tmp_path / "gateway.env").write_text(f"GATEWAY_ADMIN_KEY={ADMIN_KEY}\n")
    unit = (doc_blocks()["systemd"]
            .replace("/opt/gateway/.venv/bin/gateway", str(Path(sys.executable).parent / "gateway"))
            .replace("/etc/gateway/gateway.yaml", str(config))
            .replace("/etc/gateway/gateway.env", str(tmp_path / "gateway.env"))
            .replace("/var/lib/gateway", str(tmp_path)))
    unit_path = tmp_path / "gateway.service"
    unit_path.write_text(unit)
    if shutil.which("systemd-analyze") is not None:
        _verify(unit_path)
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    command = exec_start.removeprefix("ExecStart=").split()
    log_path = tmp_path / "unit.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(*command, cwd=tmp_path, stdout=log, stderr=log,
                                                    env={**serve_env(), "GATEWAY_ADMIN_KEY": ADMIN_KEY})
    try:
        await wait_healthy(proc, f"http://127.0.0.1:{port}", log_path)
        # Every worker up before the stop (granian's stop while a worker starts waits for ever: noted)
        workers = int(command[command.index("--workers") + 1])
        for _ in range(600):
            if _read(log_path).count("Started worker-") >= workers:
                break
            await asyncio.sleep(0.05)
    finally:
        proc.terminate()  # systemd's stop: SIGTERM, then SIGKILL after TimeoutStopSec
        timeout_s = float(next(line for line in unit.splitlines() if line.startswith("TimeoutStopSec="))
                          .removeprefix("TimeoutStopSec="))
        try:
            code = await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise AssertionError(f"not stopped within TimeoutStopSec:\n{_read(log_path)[-3000:]}") from None
        assert code == 0, _read(log_path)[-3000:]
