"""``gateway serve --server NAME`` itself applies ``limits.header_timeout_s`` and the refusal
answer of ``gateway.server_config`` (the rest of the suite runs the app on embedded servers built
by the same functions): a real child process per server, one worker."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import yaml

from gateway.servers import SERVERS
from tests.hardening.conftest import raw_http, split_response
from tests.hardening.test_deadlines import HEALTHZ, SLOW_HEAD, cut_after
from tests.hardening.test_parser_refusal import WITH_ID
from tests.serving import free_port, serve_env, stop, wait_healthy

pytestmark = pytest.mark.slow

HEAD_S = 1.0


def _config(tmp_path: Path, port: int) -> Path:
    raw = {"listen": {"host": "127.0.0.1", "port": port}, "database": f"sqlite:///{tmp_path}/gateway.db",
           "admin_key": "admin-serve-limits", "simulator": {"enabled": False}, "models": [],
           "upstreams": [], "limits": {"header_timeout_s": HEAD_S}}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("server", SERVERS)
async def test_serve_applies_header_deadline_and_refusal_answer(server: str, tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port)
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config), "--server", server,
            stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=tmp_path, env=serve_env())
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(proc, base, log_path)
        slow_head = asyncio.create_task(cut_after(base, SLOW_HEAD, 4 * HEAD_S))
        silent = asyncio.create_task(cut_after(base, b"", 4 * HEAD_S))
        refused = await raw_http(base, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n")
        status, headers, _ = split_response(refused)
        assert status == 400, refused
        # Granian lets no request id be added to its parser's answer (test_parser_refusal.py).
        assert headers.get("x-service-request-id", "").startswith("req_") == (server in WITH_ID)
        cut = [await slow_head, await silent]
        for elapsed, received in cut:
            assert 0.8 * HEAD_S < elapsed < 3 * HEAD_S, (elapsed, received)
            assert not received.startswith(b"HTTP/1.1 2"), received
        assert (await raw_http(base, HEALTHZ)).startswith(b"HTTP/1.1 200")
    finally:
        code = await stop(proc)
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
