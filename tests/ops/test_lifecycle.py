"""Issue 34 point 2, CONTRACT 6b: a real ``gateway serve`` stopped with SIGTERM while a stream is in
flight, on each server. Past ``shutdown_grace_s`` the stream gets its family's error event (the
openai SDK raises it), the request log says ``shutdown`` and the ledger holds the charge for what
was delivered; a stream that ends within the grace ends normally. No ERROR line, no traceback, exit
code 0. The drain itself (``/readyz`` unready, requests counted) is checked on an embedded app."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import openai
import orjson
import pytest
import pytest_asyncio

from tests.serving import free_port, log_tail, serve_env, stop, wait_healthy

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle

ADMIN_KEY = "admin-test-key"
SLOW = {"id": "slow-chat", "owned_by": "test", "price": {"input_per_mtok": 1000, "output_per_mtok": 1000}}
QUICK = {**SLOW, "id": "quick-chat"}
SERVERS = [name for name in ("granian", "uvicorn", "hypercorn") if importlib.util.find_spec(name)]


class Served:
    def __init__(self, proc: asyncio.subprocess.Process, base_url: str, db: Path, log: Path) -> None:
        self.proc = proc
        self.base_url = base_url
        self.db = db
        self.log = log

    def rows(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with contextlib.closing(sqlite3.connect(self.db)) as conn:
            return conn.execute(sql, args).fetchall()


def write_config(tmp_path: Path, sim_base_url: str, port: int, **top: Any) -> Path:
    raw: dict[str, Any] = {
        "listen": {"host": "127.0.0.1", "port": port}, "database": f"sqlite:///{tmp_path}/gateway.db",
        "admin_key": ADMIN_KEY, "simulator": {"enabled": False},
        "models": [SLOW, QUICK],
        # 300 ms between tokens: a stream (the simulator's 20 to 60 tokens) runs for 6 to 18 s
        "upstreams": [{"name": "sim", "protocol": "chat", "base_url": sim_base_url, "api_key": "sk-sim",
                       "models": {"slow-chat": "sim-tok300", "quick-chat": "sim-tok50"}}],
        **top}
    path = tmp_path / "gateway.yaml"
    path.write_bytes(orjson.dumps(raw))  # JSON is YAML
    return path


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, config: Path, server: str, port: int,
                  workers: int = 1) -> AsyncIterator[Served]:
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config), "--server", server,
            "--workers", str(workers),
            stdout=out, stderr=asyncio.subprocess.STDOUT, cwd=tmp_path, env=serve_env())
    served = Served(proc, f"http://127.0.0.1:{port}", tmp_path / "gateway.db", log)
    try:
        await wait_healthy(proc, served.base_url, log)
        yield served
    finally:
        await stop(proc, signal.SIGKILL)


async def make_key(base_url: str) -> str:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(base_url + "/admin/users", json={"name": "life", "quota_usd": 100}) as resp:
            user = await resp.json()
        async with http.post(base_url + "/admin/keys", json={"user_id": user["id"]}) as resp:
            return str((await resp.json())["key"])


def no_errors_logged(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, log_tail(log)
    assert " ERROR " not in text and "[ERROR]" not in text, log_tail(log)


@pytest_asyncio.fixture
async def sim_base_url(simulator: Any) -> str:
    return str(simulator.base_url)


@pytest.mark.parametrize("server", SERVERS)
async def test_a_stream_past_the_grace_gets_the_error_event_and_is_charged_and_logged_shutdown(
        tmp_path: Path, sim_base_url: str, server: str) -> None:
    port = free_port()
    config = write_config(tmp_path, sim_base_url, port, shutdown_grace_s=1)
    async with serving(tmp_path, config, server, port) as served:
        client = openai.AsyncOpenAI(base_url=served.base_url + "/v1", api_key=await make_key(served.base_url),
                                    max_retries=0)
        stream = await client.chat.completions.create(
            model="slow-chat", stream=True, max_tokens=200, messages=[{"role": "user", "content": "go on"}])
        texts: list[str] = []
        with pytest.raises(openai.APIError) as raised:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    texts.append(chunk.choices[0].delta.content)
                if len(texts) == 3:
                    served.proc.send_signal(signal.SIGTERM)
        assert "shutting down" in str(raised.value)
        assert 3 < len(texts) < 10  # the grace (1 s) let a few more through, not the whole stream
        await client.close()
        assert await asyncio.wait_for(served.proc.wait(), 30) == 0
        no_errors_logged(served.log)
        [(outcome, status, code, charge, completion)] = served.rows(
            "SELECT outcome, status, error_code, charge_nano, completion_tokens FROM request_logs "
            "WHERE model = 'slow-chat'")
        assert (outcome, status, code) == ("shutdown", 200, "service_unavailable")
        # what was delivered (the upstream reported no usage yet: estimated from the text that went out)
        assert len(texts) <= completion < 3 * len(texts)
        assert charge > 0
        settled = served.rows("SELECT SUM(charge_nano) FROM ledger WHERE kind = 'settle'")[0][0]
        assert settled == charge  # the ledger holds the charge of what was delivered
        assert served.rows("SELECT COUNT(*) FROM reservations")[0][0] == 0


async def test_a_stream_that_ends_within_the_grace_ends_normally(tmp_path: Path, sim_base_url: str) -> None:
    port = free_port()
    config = write_config(tmp_path, sim_base_url, port, shutdown_grace_s=20)
    async with serving(tmp_path, config, "granian", port) as served:
        client = openai.AsyncOpenAI(base_url=served.base_url + "/v1", api_key=await make_key(served.base_url),
                                    max_retries=0)
        stream = await client.chat.completions.create(  # 20 to 60 tokens, 50 ms apart: within 3 s
            model="quick-chat", stream=True, messages=[{"role": "user", "content": "go on"}])
        texts: list[str] = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                texts.append(chunk.choices[0].delta.content)
            if len(texts) == 2:
                served.proc.send_signal(signal.SIGTERM)
        await client.close()
        assert await asyncio.wait_for(served.proc.wait(), 30) == 0
        no_errors_logged(served.log)
        [(outcome, completion)] = served.rows(
            "SELECT outcome, completion_tokens FROM request_logs WHERE model = 'quick-chat'")
        assert outcome == "success" and completion >= len(texts) >= 20


async def test_readyz_says_shutting_down_while_draining(gw: GatewayHandle) -> None:
    assert (await gw.request("GET", "/readyz")).status == 200
    gw.gateway.lifecycle.begin()
    reply = await gw.request("GET", "/readyz")
    assert reply.status == 503 and reply.json()["status"] == "shutting_down"


async def test_version_prints_the_package_version() -> None:
    from importlib.metadata import version

    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "gateway", "--version", env=serve_env(),
                                                stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    assert out.decode().strip() == f"gateway {version('model-gateway')}"
