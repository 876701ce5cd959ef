"""Issue 34 point 4: the demo user (a key with money, printed once) is made on a first start only
when the config uses the simulator, or says ``bootstrap.demo_user: true``; the banner's example
call asks for a model the config has."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from gateway.server.bootstrap import NO_USERS_HINT, DemoCredentials, bootstrap, example_model
from gateway.settings.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 40.0
TEXT = ("chat", "messages", "v1beta")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _provider_config(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """A real-provider config: no simulator anywhere, and a video model listed first."""
    return {
        "listen": {"host": "127.0.0.1", "port": _free_port()},
        "database": f"sqlite:///{tmp_path}/data/gateway.db",
        "models": [{"id": "sora-x", "price": {"per_second": 0.1}}, {"id": "gpt-x"}, {"id": "claude-x"}],
        "upstreams": [
            {"name": "videos", "protocol": "videos", "base_url": "http://127.0.0.1:9", "models": ["sora-x"]},
            {"name": "anthropic", "protocol": "messages", "base_url": "http://127.0.0.1:9",
             "models": ["claude-x"]},
            {"name": "openai", "protocol": "chat", "base_url": "http://127.0.0.1:9", "models": ["gpt-x"]},
        ],
        **changes,
    }


async def test_no_demo_user_on_a_provider_config_unless_asked(tmp_path: Path) -> None:
    config = parse_config(yaml.safe_dump(_provider_config(tmp_path)))
    assert await bootstrap(config) == NO_USERS_HINT  # nothing made, and the way to make a user said
    asked = parse_config(yaml.safe_dump(_provider_config(tmp_path, bootstrap={"demo_user": True})))
    made = await bootstrap(asked)
    assert isinstance(made, DemoCredentials) and made.api_key.startswith("sk-")
    assert await bootstrap(asked) is None and await bootstrap(config) is None  # users exist now


async def test_the_simulator_makes_the_demo_user_unless_told_not_to(tmp_path: Path) -> None:
    raw = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
    raw.update(database=f"sqlite:///{tmp_path}/one/gateway.db", admin_key="")
    assert isinstance(await bootstrap(parse_config(yaml.safe_dump(raw))), DemoCredentials)
    raw.update(database=f"sqlite:///{tmp_path}/two/gateway.db", bootstrap={"demo_user": False})
    assert await bootstrap(parse_config(yaml.safe_dump(raw))) == NO_USERS_HINT
    # An upstream at the simulator's address is the simulator, even when another process runs it.
    raw.update(database=f"sqlite:///{tmp_path}/three/gateway.db", bootstrap={}, simulator={"enabled": False})
    assert isinstance(await bootstrap(parse_config(yaml.safe_dump(raw))), DemoCredentials)


def test_the_example_model_is_the_first_text_model_of_the_catalogue(tmp_path: Path) -> None:
    config = parse_config(yaml.safe_dump(_provider_config(tmp_path)))
    assert example_model(config, TEXT) == "gpt-x"  # not sora-x (a video model), nor an absent sim-chat
    assert example_model(config, ()) is None
    default = parse_config((ROOT / "config" / "gateway.yaml").read_text(), env_needed_by=())
    assert example_model(default, TEXT) == "sim-chat"


async def _serve_once(config: dict[str, Any], tmp_path: Path) -> tuple[str, str]:
    """Run ``gateway serve`` until it answers /healthz; its stdout and log."""
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    log_path = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(path), cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=log)
    assert proc.stdout is not None
    try:
        await _healthy(f"http://127.0.0.1:{config['listen']['port']}/healthz", proc, log_path)
    finally:
        proc.terminate()
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            raise
    return out.decode(), log_path.read_text()


def _read(path: Path) -> str:
    return path.read_text()


async def _healthy(url: str, proc: asyncio.subprocess.Process, log_path: Path) -> None:
    deadline = asyncio.get_running_loop().time() + TIMEOUT_S
    async with aiohttp.ClientSession() as http:
        while True:
            assert proc.returncode is None, _read(log_path)
            assert asyncio.get_running_loop().time() < deadline, _read(log_path)
            try:
                async with http.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)


async def test_serve_prints_no_key_for_a_provider_config(tmp_path: Path) -> None:
    out, log = await _serve_once(_provider_config(tmp_path), tmp_path)
    assert "API key" not in out and "User token" not in out
    assert "No users yet (no demo user: the config does not use the simulator)" in log
    assert "gateway users create --name NAME" in log and "Traceback" not in log


async def test_the_banner_calls_a_model_the_config_has(tmp_path: Path) -> None:
    config = _provider_config(tmp_path, bootstrap={"demo_user": True})
    out, _ = await _serve_once(config, tmp_path)
    assert "API key:    sk-" in out and "User token: ut-" in out
    assert '"model": "gpt-x"' in out and "sim-chat" not in out
