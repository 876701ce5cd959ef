"""``gateway serve`` as a real process: the default config on free ports, the simulator as a child
process, the demo credentials printed on first start only, SIGTERM ends it with exit code 0."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from gateway.server.bootstrap import bootstrap
from gateway.server.serve import CONFIG_ENV
from gateway.settings.config import load_config

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0
CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello"}]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def e2e_config(tmp_path: Path) -> tuple[Path, int, int]:
    """config/gateway.yaml itself, moved to free ports and a temporary database."""
    raw = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
    port, sim_port = free_port(), free_port()
    raw["listen"]["port"] = port
    raw["simulator"]["port"] = sim_port
    raw["database"] = f"sqlite:///{tmp_path}/data/gateway.db"
    raw["admin_key"] = "admin-e2e"
    # Stops are about the banner and exit codes here, not draining: a worker still starting when
    # SIGTERM comes may wait out the grace on a loaded machine (granian's graceful timeout follows it).
    raw["shutdown_grace_s"] = 5
    for upstream in raw["upstreams"]:
        upstream["base_url"] = f"http://127.0.0.1:{sim_port}"
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path, port, sim_port


def _pythonpath() -> str:
    """The checkout first, so the child imports this tree even where it is not pip-installed."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


class Server:
    """A ``gateway serve`` child: stdout read line by line, stderr (logs) to a file."""

    def __init__(self, proc: asyncio.subprocess.Process, log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path
        self.stdout: list[str] = []

    @classmethod
    async def start(cls, config: Path, *extra: str) -> Server:
        log_path = config.parent / f"serve-{len(list(config.parent.glob('serve-*')))}.log"
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway", "serve", "--config", str(config), *extra,
                stdout=asyncio.subprocess.PIPE, stderr=log, cwd=config.parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": _pythonpath()})
        return cls(proc, log_path)

    async def read_until(self, marker: str) -> str:
        assert self.proc.stdout is not None
        while True:
            line = (await asyncio.wait_for(self.proc.stdout.readline(), START_TIMEOUT_S)).decode()
            assert line, f"exited early; log:\n{self.log_path.read_text()}"
            self.stdout.append(line)
            if marker in line:
                return line

    async def wait_healthy(self, base_url: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + START_TIMEOUT_S
        async with aiohttp.ClientSession() as http:
            while True:
                assert self.proc.returncode is None, self.log_path.read_text()
                try:
                    async with http.get(base_url + "/healthz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                assert loop.time() < deadline, self.log_path.read_text()
                await asyncio.sleep(0.05)

    async def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.stdout is not None
        rest = await asyncio.wait_for(self.proc.stdout.read(), START_TIMEOUT_S)
        self.stdout.append(rest.decode())
        return await asyncio.wait_for(self.proc.wait(), START_TIMEOUT_S)

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()


async def test_serve_end_to_end(tmp_path: Path) -> None:
    config, port, sim_port = e2e_config(tmp_path)
    base_url = f"http://127.0.0.1:{port}"
    server = await Server.start(config)
    try:
        api_key = (await server.read_until("API key:")).split("API key:")[1].strip()
        user_token = (await server.read_until("User token:")).split("User token:")[1].strip()
        assert api_key.startswith("sk-") and user_token.startswith("ut-")
        await server.wait_healthy(base_url)
        assert listening(sim_port)  # the simulator child is up
        assert (tmp_path / "data" / "gateway.db").exists()  # its directory was made

        async with aiohttp.ClientSession() as http:
            headers = {"Authorization": f"Bearer {api_key}"}
            async with http.get(base_url + "/v1/models", headers=headers) as resp:
                assert resp.status == 200
                assert "sim-chat" in {m["id"] for m in (await resp.json())["data"]}
                assert resp.headers["X-Service-Request-Id"].startswith("req_")
            async with http.post(base_url + "/v1/chat/completions", json=CHAT, headers=headers) as resp:
                assert resp.status == 200, await resp.text()  # relayed to the simulator child
            wrong = {"Authorization": "Bearer sk-" + "x" * 40}
            async with http.get(base_url + "/v1/models", headers=wrong) as resp:
                assert resp.status == 401
            admin = {"Authorization": "Bearer admin-e2e"}
            async with http.get(base_url + "/admin/users", headers=admin) as resp:
                assert resp.status == 200 and [u["name"] for u in (await resp.json())["data"]] == ["demo"]
            async with http.get(base_url + "/v1beta/models", params={"key": api_key}) as resp:
                assert resp.status == 200

        assert await server.terminate() == 0
    finally:
        server.kill()
    assert not listening(sim_port)  # the simulator child went with it
    logs = server.log_path.read_text()
    assert '"path":"/healthz"' in logs  # access log lines
    assert api_key not in logs and user_token not in logs and api_key[3:] not in logs
    assert "key=REDACTED" in logs


@pytest.mark.slow
async def test_serve_with_workers_prints_no_banner_when_users_exist(tmp_path: Path) -> None:
    config, port, _ = e2e_config(tmp_path)
    base_url = f"http://127.0.0.1:{port}"
    assert await bootstrap(load_config(config)) is not None  # as a first start would have done
    second = await Server.start(config, "--workers", "2")
    try:
        await second.wait_healthy(base_url)
        async with aiohttp.ClientSession() as http:
            statuses: list[Any] = []
            for _ in range(6):
                async with http.get(base_url + "/healthz") as resp:
                    statuses.append(resp.status)
        assert statuses == [200] * 6
        assert await second.terminate() == 0
    finally:
        second.kill()
    assert not any("API key:" in line for line in second.stdout)  # only a first start prints it


async def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    config, port, _ = e2e_config(tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["simulator"]["enabled"] = False
    config.write_text(yaml.safe_dump(raw))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        server = await Server.start(config)
        try:
            code = await asyncio.wait_for(server.proc.wait(), START_TIMEOUT_S)
        finally:
            server.kill()
    assert code == 1
    assert f"cannot listen on 127.0.0.1:{port}: the address is in use" in server.log_path.read_text()


def test_the_serving_app_keeps_what_startup_built_out_of_full_collections(tmp_path: Path) -> None:
    """What a serving process has built before its first request is frozen (``gc.freeze``): a full
    collection under load would otherwise walk it all on the event loop (pauses of 15-30 ms)."""
    config, _, _ = e2e_config(tmp_path)
    probe = ("import gc; from gateway.server.serve import worker_app; "
             "assert gc.get_freeze_count() == 0; worker_app(); print(gc.get_freeze_count())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": _pythonpath(), CONFIG_ENV: str(config)})
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 10_000  # modules, plugins, route table, catalogue
