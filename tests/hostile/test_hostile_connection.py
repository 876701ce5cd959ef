"""Hostile upstreams (issue 32, point 4, the upstream side), the connection: a TLS certificate for
another host name, a host name whose first address never answers, a kept-alive connection closed
as the next POST arrives. The answer's own faults are ``test_hostile_upstream.py``.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import pytest_asyncio

from tests.conftest import ADMIN_KEY, SimulatorHandle
from tests.hostile.fronting import (
    COMPLETION,
    HEALTHZ_SLACK_S,
    TIMEOUTS,
    Front,
    StartFront,
    answer_every_request,
    assert_clean_502,
    assert_unharmed,
    attack,
    front,
    json_answer,
)
from tests.hostile.upstream import Connection, HealthzSampler, HostileUpstream, TestCA
from tests.serving import free_port, log_tail, spawn, stop, wait_healthy

__all__ = ["front"]  # the fixture

TWOFOLD_HOST = "twofold.hostile.test"  # resolves (in this test) to a blackhole, then a working address


# --- TLS: a certificate for another host name ----------------------------------------------------------
# aiohttp's default TLS context is made when aiohttp is imported, before any test could name a CA
# for it: the gateway that must trust the test CA (``SSL_CERT_FILE``, OpenSSL's own variable) is a
# child process, ``gateway serve``, started with it.

async def _serve_child(tmp_path: Path, upstreams: list[dict[str, Any]], models: list[str]) -> \
        tuple[asyncio.subprocess.Process, str, Path]:
    port = free_port()
    config = {
        "listen": {"host": "127.0.0.1", "port": port}, "database": f"sqlite:///{tmp_path}/tls.db",
        "admin_key": ADMIN_KEY, "simulator": {"enabled": False},
        "logging": {"access_log": False, "level": "INFO"}, "routing": {"max_attempts": 1},
        "models": [{"id": m, "price": {"input_per_mtok": 1, "output_per_mtok": 1}} for m in models],
        "upstreams": upstreams,
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(orjson.dumps(config).decode())
    log_path = tmp_path / "serve.log"
    proc = await spawn(path, log_path)
    base_url = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(proc, base_url, log_path)
    except AssertionError:
        await stop(proc)
        raise
    return proc, base_url, log_path


async def _key(http: aiohttp.ClientSession, base_url: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    user_body = {"name": "tls", "quota_usd": 10}
    async with http.post(base_url + "/admin/users", json=user_body, headers=admin) as r:
        user = await r.json()
    async with http.post(base_url + "/admin/keys", json={"user_id": user["id"]}, headers=admin) as r:
        return str((await r.json())["key"])


async def test_a_certificate_for_another_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              simulator: SimulatorHandle) -> None:
    ca = TestCA(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))  # inherited by the child only
    right = HostileUpstream(answer_every_request, tls=ca.server_context("127.0.0.1"))
    wrong = HostileUpstream(answer_every_request, tls=ca.server_context("upstream.example.com"))
    async with right, wrong:
        upstreams = [{"name": name, "protocol": "chat", "base_url": up.base_url, "api_key": "sk-hostile",
                      "models": {name: "up-model"}, "timeouts": TIMEOUTS}
                     for name, up in (("tls-right", right), ("tls-wrong", wrong))]
        upstreams.append({"name": "sim", "protocol": "chat", "base_url": simulator.base_url,
                          "api_key": "sk-sim", "models": ["sim-chat"]})
        models = ["tls-right", "tls-wrong", "sim-chat"]
        proc, base_url, log_path = await _serve_child(tmp_path, upstreams, models)
        try:
            async with aiohttp.ClientSession() as http:
                key = {"Authorization": f"Bearer {await _key(http, base_url)}"}

                async def call(model: str) -> tuple[int, Any]:
                    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
                    async with http.post(base_url + "/v1/chat/completions", json=body, headers=key) as resp:
                        return resp.status, await resp.json()

                sampler = HealthzSampler(http, base_url, in_process=False)  # the gateway is the child
                idle = await sampler.idle_p99()
                async with sampler.running():
                    status, refused = await call("tls-wrong")
                assert status == 502 and refused["error"]["code"] == "upstream_error", refused
                assert sampler.p99 <= idle + HEALTHZ_SLACK_S, sampler.stats()
                # the same CA's certificate for the right name is trusted: the refusal was the name's
                assert (await call("tls-right"))[0] == 200, "the test CA is not trusted by the child"
                assert (await call("sim-chat"))[0] == 200
        finally:
            await stop(proc)
        assert wrong.received == [] and len(right.received) == 1
    log = log_tail(log_path, 100_000)
    assert not re.search(r"Traceback|Fatal error on transport|Exception in callback", log), log[-3000:]
    assert len(re.findall(r"WARNING .*tls-wrong", log)) == 1, log[-3000:]


# --- an address that never answers ---------------------------------------------------------------------

@pytest_asyncio.fixture
async def twofold_dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``twofold_dns(port)``: ``TWOFOLD_HOST`` resolves to 127.0.0.2 (first), then 127.0.0.1, on
    this event loop (what both the gateway's resolver and aiohttp's ask)."""
    loop = asyncio.get_running_loop()
    system = loop.getaddrinfo

    def install(port: int) -> None:
        async def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host != TWOFOLD_HOST:
                return await system(host, *args, **kwargs)
            tcp = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "")
            return [(*tcp, ("127.0.0.2", port)), (*tcp, ("127.0.0.1", port))]

        monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)

    return install


@pytest.fixture
def blackhole() -> Iterator[Callable[[int], socket.socket]]:
    """``blackhole(port)``: 127.0.0.2:port listens with a backlog of one connection, and holds it:
    a SYN sent there is dropped (never refused, never accepted), as at an address that is gone."""
    made: list[socket.socket] = []

    def make(port: int) -> socket.socket:
        listener = socket.socket()
        listener.bind(("127.0.0.2", port))
        listener.listen(0)
        made.append(listener)
        made.append(socket.create_connection(("127.0.0.2", port), timeout=1))  # fills the queue
        return listener

    yield make
    for sock in made:
        sock.close()


async def test_the_next_address_when_the_first_never_answers(
        front: StartFront, caplog: pytest.LogCaptureFixture, twofold_dns: Callable[[int], None],
        blackhole: Callable[[int], socket.socket]) -> None:
    connect_s = 2.0
    async with HostileUpstream(answer_every_request) as up:
        blackhole(up.port)
        twofold_dns(up.port)
        fronted = await front(f"http://{TWOFOLD_HOST}:{up.port}", protocols=("chat",),
                              timeouts={"connect_s": connect_s})
        attacked = await attack(fronted, caplog, protocols=("chat",))
        [outcome] = attacked.outcomes
        assert outcome.status == 200, outcome
        assert outcome.elapsed_s < connect_s, f"the second address was tried after {outcome.elapsed_s:.2f}s"
        assert len(up.received) == 1
        await assert_unharmed(fronted, caplog, attacked, {})


# --- a stale keep-alive connection -------------------------------------------------------------------

@pytest.mark.parametrize("attempts", [1, 2])
async def test_a_kept_alive_connection_closed_under_the_next_post(
        front: StartFront, caplog: pytest.LogCaptureFixture, attempts: int) -> None:
    """The upstream answers the first call and keeps the connection; the next POST arrives on it
    and the upstream closes without answering. A POST is not idempotent: it may reach the upstream
    again only as another attempt the routing policy allows."""
    answered = False

    async def once_then_hang_up(conn: Connection) -> None:
        nonlocal answered
        while await conn.request() is not None:
            if answered:
                conn.close()
                return
            answered = True
            await conn.send(json_answer(COMPLETION))

    async with HostileUpstream(once_then_hang_up) as up:
        fronted: Front = await front(up.base_url, protocols=("chat",), attempts=attempts)
        first = await attack(fronted, caplog, protocols=("chat",))
        assert first.outcomes[0].status == 200, first.outcomes
        assert up.connections == 1
        attacked = await attack(fronted, caplog, protocols=("chat",))
        assert_clean_502(attacked.outcomes[0])
        second_post_arrivals = len(up.received) - 1
        assert 1 <= second_post_arrivals <= attempts, up.received
        # the first went on the kept-alive connection; each later attempt on a connection of its own
        assert up.connections == second_post_arrivals
        await assert_unharmed(fronted, caplog, attacked, {"hostile-chat": second_post_arrivals})


async def test_a_kept_alive_connection_closed_while_idle(front: StartFront,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """The upstream closes its side of an idle kept-alive connection before the next call: that
    call goes on a new connection, served, its POST sent once."""
    async def answer_then_close(conn: Connection) -> None:
        if await conn.request() is not None:
            await conn.send(json_answer(COMPLETION))
            conn.close()

    async with HostileUpstream(answer_then_close) as up:
        fronted = await front(up.base_url, protocols=("chat",))
        first = await attack(fronted, caplog, protocols=("chat",))
        assert first.outcomes[0].status == 200, first.outcomes
        await asyncio.sleep(0.05)  # the close reaches the gateway's idle connection
        attacked = await attack(fronted, caplog, protocols=("chat",))
        assert attacked.outcomes[0].status == 200, attacked.outcomes
        assert len(up.received) == 2 and up.connections == 2
        await assert_unharmed(fronted, caplog, attacked, {"hostile-chat": 0})
