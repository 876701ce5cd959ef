"""Point 3 of issue 15: start-up that explains itself. A taken port is one line and exit code 1
(gateway and simulator); the simulator never adopts a foreign listener; the simulator's port is
written once in the config and the upstreams follow it; a log line lists plugins, upstreams and
models."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gateway.settings.config import parse_config
from tests import loopback

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 40.0


def _env() -> dict[str, str]:
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath}


async def _run(*args: str, cwd: Path) -> tuple[int, str, str]:
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "gateway", *args, cwd=cwd, env=_env(),
                                                stdout=pipe, stderr=pipe)
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port some other process (here: a bare socket) listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_config(tmp_path: Path, **changes: Any) -> Path:
    """config/gateway.yaml with a temporary database and the given top-level changes."""
    raw = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
    raw["database"] = f"sqlite:///{tmp_path}/data/gateway.db"
    raw.update(changes)
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


async def test_busy_gateway_port_is_one_line_and_exit_1(tmp_path: Path, taken_port: int) -> None:
    config = default_config(tmp_path, listen={"host": "127.0.0.1", "port": taken_port},
                            simulator={"enabled": True, "port": free_port()})
    code, out, err = await _run("serve", "--config", str(config), cwd=tmp_path)
    assert code == 1
    assert err.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{taken_port}: the address is in use "
        "(listen in the config, or --port)"]
    assert "API key" not in out  # nothing was made (a demo key shown once, for a server that never ran)
    assert not (tmp_path / "data").exists()


async def test_busy_simulator_port_is_one_line_and_exit_1(tmp_path: Path, taken_port: int) -> None:
    code, _, err = await _run("simulator", "--port", str(taken_port), cwd=tmp_path)
    assert code == 1
    assert err.strip().splitlines() == [
        f"error: the simulator cannot listen on 127.0.0.1:{taken_port}: the address is in use"]


async def test_simulator_command_takes_its_port_from_the_config(tmp_path: Path, taken_port: int) -> None:
    config = default_config(tmp_path, simulator={"enabled": True, "port": taken_port})
    code, _, err = await _run("simulator", "--config", str(config), cwd=tmp_path)
    assert code == 1  # it tried the config's port, which is taken
    assert err.strip().splitlines() == [
        f"error: the simulator cannot listen on 127.0.0.1:{taken_port}: the address is in use"]


@pytest_asyncio.fixture
async def impostor() -> AsyncIterator[int]:
    """Another server on the simulator's port that even answers /healthz like a simulator."""
    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "simulator": True, "instance": "someone-else"})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    async with loopback.serving(app) as base:
        yield int(base.rsplit(":", 1)[1])


async def test_a_foreign_listener_is_never_taken_for_the_simulator(tmp_path: Path, impostor: int) -> None:
    config = default_config(tmp_path, listen={"host": "127.0.0.1", "port": free_port()},
                            simulator={"enabled": True, "port": impostor})
    code, out, err = await _run("serve", "--config", str(config), cwd=tmp_path)
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        f"error: the simulator's port 127.0.0.1:{impostor} (simulator.port in the config) is already in use "
        "by another process")
    assert "Traceback" not in err and "API key" not in out


def test_base_url_simulator_follows_the_simulator_port() -> None:
    text = (ROOT / "config" / "gateway.yaml").read_text()
    assert "127.0.0.1:8101" not in text  # the port is written once, in simulator.port
    raw = yaml.safe_load(text)
    raw["simulator"] = {"enabled": True, "port": 9123}
    raw["admin_key"] = ""
    config = parse_config(yaml.safe_dump(raw))
    assert {up.base_url for up in config.upstreams} == {"http://127.0.0.1:9123"}
    raw["simulator"] = {"enabled": False, "host": "0.0.0.0", "port": 9124}
    assert {up.base_url for up in parse_config(yaml.safe_dump(raw)).upstreams} == {"http://127.0.0.1:9124"}


async def test_moving_the_simulator_is_one_edit_and_start_up_says_what_it_loaded(tmp_path: Path) -> None:
    port, sim_port = free_port(), free_port()
    config = default_config(tmp_path, listen={"host": "127.0.0.1", "port": port},
                            simulator={"enabled": True, "port": sim_port}, admin_key="admin-x")
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config), cwd=tmp_path, env=_env(),
            stdout=asyncio.subprocess.PIPE, stderr=log)
    assert proc.stdout is not None
    try:
        key = ""
        while not key:
            line = (await asyncio.wait_for(proc.stdout.readline(), TIMEOUT_S)).decode()
            assert line, log_path.read_text()
            if "API key:" in line:
                key = line.split("API key:")[1].strip()
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            for _ in range(400):
                try:
                    async with http.get(base + "/healthz") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.05)
            body = {"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}]}
            async with http.post(base + "/v1/chat/completions", json=body,
                                 headers={"Authorization": f"Bearer {key}"}) as resp:
                assert resp.status == 200, await resp.text()  # reached the simulator on its new port
            async with http.get(f"http://127.0.0.1:{sim_port}/healthz") as resp:
                assert len((await resp.json())["instance"]) == 32  # the child's own token
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), TIMEOUT_S)
    log_text = log_path.read_text()
    summary = next(line for line in log_text.splitlines() if "starting gateway:" in line)
    assert f"on 127.0.0.1:{port}" in summary
    assert "plugins: gateway.hooks.defaults, " in summary and "translators.chat" in summary
    assert f"sim-openai (chat, http://127.0.0.1:{sim_port}, 5 models)" in summary
    assert "models: sim-chat, sim-claude, " in summary
