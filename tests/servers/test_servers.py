"""``gateway serve --server NAME``: each supported ASGI server, with one worker and with two, serves
chat and messages through the official ``openai`` and ``anthropic`` SDKs (plain and streamed),
charges every call once (the user's balance plus what was used equals the top-up, one log row per
call, ``gateway audit`` clean afterwards), answers HTTP/2 on plain TCP where the server speaks it
(hypercorn), counts every worker's calls in /metrics, and stops gracefully on SIGTERM with
exit code 0. The rest of the suite runs on the default server; this is the smoke subset for every
server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import anthropic
import httpx
import openai
import pytest
import yaml

from gateway.server.servers import DEFAULT_SERVER, SERVERS, not_installed
from tests.servers import embedded
from tests.serving import free_port, serve_env, stop, wait_healthy

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import SimulatorHandle

pytestmark = pytest.mark.slow

ADMIN = "admin-servers-test"
H2C_SERVERS = ("hypercorn",)  # granian is served HTTP/1-only (gateway.server.options)
CALLS = 12  # concurrent chat calls, spread over the workers


def write_config(tmp_path: Path, sim_base: str, port: int) -> Path:
    raw: dict[str, Any] = {
        "listen": {"host": "127.0.0.1", "port": port},
        "database": f"sqlite:///{tmp_path}/gateway.db",
        "admin_key": ADMIN,
        "simulator": {"enabled": False},
        "models": [{"id": "sim-chat", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
                   {"id": "sim-claude", "price": {"input_per_mtok": 3, "output_per_mtok": 15}}],
        "upstreams": [
            {"name": "sim-openai", "protocol": "chat", "base_url": sim_base, "api_key": "sk-sim",
             "models": ["sim-chat"]},
            {"name": "sim-anthropic", "protocol": "messages", "base_url": sim_base, "api_key": "sk-sim",
             "models": ["sim-claude"]}],
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def descendants(pid: int) -> list[int]:
    found = [pid]
    for parent in found:
        for task in Path(f"/proc/{parent}/task").glob("*"):
            children = task / "children"
            if children.exists():
                found.extend(int(c) for c in children.read_text().split())
    return found[1:]


def metered_calls(exposition: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in exposition.splitlines()
               if line.startswith("gateway_requests_total{"))


async def _admin(session: aiohttp.ClientSession, base: str, method: str, path: str,
                 body: dict[str, Any] | None = None) -> Any:
    async with session.request(method, base + path, json=body,
                               headers={"Authorization": f"Bearer {ADMIN}"}) as resp:
        assert resp.status < 300, await resp.text()
        return await resp.json()


def test_help_names_the_default_server() -> None:
    out = subprocess.run([sys.executable, "-m", "gateway", "serve", "--help"], capture_output=True,
                         text=True, check=True, env={**serve_env(), "COLUMNS": "100"}).stdout
    line = next(line for line in out.splitlines() if line.strip().startswith("--server"))
    assert f"(default: {DEFAULT_SERVER})" in line
    assert all(name in out for name in SERVERS)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("server", embedded.server_params())
async def test_server_serves_charges_and_stops(server: str, workers: int, tmp_path: Path,
                                               simulator: SimulatorHandle) -> None:
    port = free_port()
    config = write_config(tmp_path, simulator.base_url, port)
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config), "--server", server,
            "--workers", str(workers), stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=tmp_path,
            env=serve_env())
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(proc, base, log_path)
        assert len(descendants(proc.pid)) >= (workers if workers > 1 else 0)
        if server in H2C_SERVERS:  # HTTP/2 over plain TCP (prior knowledge), as gRPC-style clients use
            async with httpx.AsyncClient(http1=False, http2=True) as h2:
                reply = await h2.get(base + "/healthz")
            assert (reply.status_code, reply.http_version) == (200, "HTTP/2")
        async with aiohttp.ClientSession() as session:
            user = await _admin(session, base, "POST", "/admin/users", {"name": "u", "quota_usd": 10})
            key = (await _admin(session, base, "POST", "/admin/keys", {"user_id": user["id"]}))["key"]
            oai = openai.AsyncOpenAI(api_key=key, base_url=base + "/v1", max_retries=0)
            ant = anthropic.AsyncAnthropic(api_key=key, base_url=base, max_retries=0)
            try:
                answers = await asyncio.gather(*(oai.chat.completions.create(
                    model="sim-chat", messages=[{"role": "user", "content": f"hello {i}"}])
                    for i in range(CALLS)))
                assert all(a.choices[0].message.content for a in answers)
                stream = await oai.chat.completions.create(
                    model="sim-chat", messages=[{"role": "user", "content": "sim:tokens=20"}], stream=True)
                pieces = [c.choices[0].delta.content async for c in stream if c.choices]
                assert len([p for p in pieces if p]) == 20
                async with ant.messages.stream(model="sim-claude", max_tokens=64,
                                               messages=[{"role": "user", "content": "hi"}]) as events:
                    text = await events.get_final_text()
                assert text
            finally:
                await oai.close()
                await ant.close()
            # Metering is written as each relay ends; wait until every call has its row.
            for _ in range(200):
                logs = await _admin(session, base, "GET", f"/admin/logs?user_id={user['id']}&page_size=100")
                if logs["total"] >= CALLS + 2:
                    break
                await asyncio.sleep(0.05)
            assert logs["total"] == CALLS + 2
            after = next(u for u in (await _admin(session, base, "GET", "/admin/users"))["data"]
                         if u["id"] == user["id"])
            assert after["used_usd"] > 0
            assert after["quota_usd"] + after["used_usd"] == pytest.approx(10, abs=1e-9)
            # Whichever worker answers, /metrics counts every worker's calls (summed over them; the
            # gauges of each worker's own state are labelled with its pid).
            for _ in range(100):
                async with session.get(base + "/metrics") as resp:
                    text = await resp.text()
                if metered_calls(text) == CALLS + 2:
                    break
                await asyncio.sleep(0.1)
            assert metered_calls(text) == CALLS + 2, text
            assert ('gateway_upstream_cooling_down{pid="' in text) == (workers > 1)
    finally:
        code = await stop(proc)
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
    audit = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "audit", "--config", str(config), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=serve_env(), cwd=tmp_path)
    out, _ = await audit.communicate()
    assert audit.returncode == 0, out.decode(errors="replace")


def test_unknown_server_is_refused(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "gateway", "serve", "--server", "nope"], capture_output=True,
                         text=True, env=serve_env(), cwd=tmp_path)
    assert out.returncode == 2
    assert "--server" in out.stderr


def test_default_server_is_installed() -> None:
    """The default server is a dependency; the others are extras (``model-gateway[uvicorn]``)."""
    assert not_installed(DEFAULT_SERVER) is None
    __import__(DEFAULT_SERVER)


def test_a_missing_extra_is_named() -> None:
    assert not_installed(DEFAULT_SERVER) is None
    assert "pip install 'model-gateway[no_such_server]'" in (not_installed("no_such_server") or "")
