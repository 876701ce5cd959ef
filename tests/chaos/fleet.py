"""Two ``gateway serve`` replicas on one database and one Redis, the calls a test sends them, and
the money identity checked after them: every call answered 200 is charged and logged (and nothing
else is charged), balances equal the ledger (``gateway audit``), nothing stays held."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import msgspec

from gateway.settings.config import Config
from tests.serving import free_port, serve_env, spawn, stop, wait_healthy

ADMIN_KEY = "admin-test-key"  # the conftest's
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
TRACEBACK = "Traceback (most recent call last)"


@dataclass
class Call:
    replica: int
    status: int
    request_id: str
    stream: bool
    code: str | None  # the error code of a refusal
    retry_after: str | None
    seconds: float
    ended: float  # time.monotonic()


@dataclass
class Fleet:
    config: Config
    tmp: Path
    urls: list[str] = field(default_factory=list)
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    config_path: Path | None = None

    async def start(self, replicas: int = 2) -> None:
        self.config_path = self.tmp / "fleet.yaml"
        self.config_path.write_bytes(msgspec.json.encode(self.config))  # JSON is YAML
        for i in range(replicas):
            port = free_port()
            path = self.tmp / f"replica-{i}.yaml"
            raw = msgspec.json.decode(msgspec.json.encode(self.config))
            raw["listen"] = {"host": "127.0.0.1", "port": port}
            path.write_bytes(msgspec.json.encode(raw))
            self.logs.append(self.tmp / f"replica-{i}.log")
            self.urls.append(f"http://127.0.0.1:{port}")
            self.procs.append(await spawn(path, self.logs[-1]))
        await asyncio.gather(*(wait_healthy(p, u, log)
                               for p, u, log in zip(self.procs, self.urls, self.logs, strict=True)))

    async def stop(self) -> list[int]:
        """SIGTERM: each replica flushes its settlements and gives its holds back; exit codes."""
        return list(await asyncio.gather(*(stop(p) for p in self.procs)))

    def log_text(self, i: int) -> str:
        return self.logs[i].read_text(errors="replace")

    async def admin(self, session: aiohttp.ClientSession, method: str, path: str,
                    body: Any = None, replica: int = 0) -> Any:
        async with session.request(method, self.urls[replica] + path, json=body, headers=ADMIN) as resp:
            assert resp.status < 300, (resp.status, await resp.text())
            return await resp.json()

    async def readyz(self, session: aiohttp.ClientSession, replica: int) -> tuple[int, Any]:
        async with session.get(self.urls[replica] + "/readyz") as resp:
            return resp.status, await resp.json()

    def audit(self) -> subprocess.CompletedProcess[str]:
        assert self.config_path is not None
        return subprocess.run([sys.executable, "-m", "gateway", "audit", "--config", str(self.config_path)],
                              capture_output=True, text=True, env=serve_env(), timeout=60, check=False)


def chat_body(stream: bool, tokens: int = 8) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "sim-chat",
                            "messages": [{"role": "user", "content": f"sim:tokens={tokens} chaos"}]}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    else:
        body["max_tokens"] = tokens
    return body


async def call(session: aiohttp.ClientSession, fleet: Fleet, replica: int, key: str, *,
               stream: bool = False, tokens: int = 8) -> Call:
    """One chat call, read to its end. A 200 stream counts as answered only when it ended with
    ``[DONE]`` after its usage (otherwise it is recorded as status 0)."""
    began = time.monotonic()
    status, code, retry_after, rid = 0, None, None, ""
    with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
        async with session.post(fleet.urls[replica] + "/v1/chat/completions", json=chat_body(stream, tokens),
                                headers={"Authorization": f"Bearer {key}"}) as resp:
            rid = resp.headers.get("X-Service-Request-Id", "")
            retry_after = resp.headers.get("Retry-After")
            body = await resp.read()
            status = resp.status
            if status != 200:
                with contextlib.suppress(ValueError):
                    code = msgspec.json.decode(body)["error"]["code"]
            elif stream and not body.rstrip().endswith(b"data: [DONE]"):
                status = 0
    return Call(replica, status, rid, stream, code, retry_after, time.monotonic() - began, time.monotonic())


async def keep_calling(session: aiohttp.ClientSession, fleet: Fleet, key: str, until: asyncio.Event,
                       *, workers: int = 2, stream_every: int = 3, tokens: int = 8,
                       pause_s: float = 0.05) -> list[Call]:
    """``workers`` loops per replica calling until ``until`` is set (every ``stream_every``-th call
    a stream). Load enough to have calls in flight at every moment of a fault; more only costs the
    suite CPU (refusals during an outage come back at once, so each loop's pause sets their rate)."""
    calls: list[Call] = []

    async def worker(replica: int, n: int) -> None:
        i = n
        while not until.is_set():
            calls.append(await call(session, fleet, replica, key, stream=i % stream_every == 0,
                                    tokens=tokens))
            i += 1
            await asyncio.sleep(pause_s)

    await asyncio.gather(*(worker(r, n) for r in range(len(fleet.urls)) for n in range(workers)))
    return calls


async def burst(session: aiohttp.ClientSession, fleet: Fleet, key: str, n: int) -> list[Call]:
    """``n`` calls at once, spread over the replicas."""
    return list(await asyncio.gather(*(call(session, fleet, i % len(fleet.urls), key) for i in range(n))))


def tally(calls: list[Call]) -> dict[str, int]:
    counts = Counter(str(c.status) if c.code is None else f"{c.status} {c.code}" for c in calls)
    return dict(sorted(counts.items()))


async def check_money(dsn: str, user_id: int, balance_nano: int, calls: list[Call],
                      fleet: Fleet) -> dict[str, int]:
    """After the fleet stopped: answered 200 = charged = logged, nothing else charged, nothing
    held, balances equal the ledger (``gateway audit`` exit 0). Returns the figures."""
    answered = {c.request_id for c in calls if c.status == 200}
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT request_id, status, outcome, charge_nano FROM request_logs "
                                "WHERE user_id = $1", user_id)
        user = await conn.fetchrow("SELECT balance_nano, used_nano FROM users WHERE id = $1", user_id)
        held = await conn.fetchval("SELECT COUNT(*) FROM reservations")
    finally:
        await conn.close()
    logged = {r["request_id"]: r for r in rows}
    missing = answered - set(logged)
    assert not missing, f"{len(missing)} calls answered 200 were never logged: {sorted(missing)[:5]}"
    wrong = [dict(logged[rid]) for rid in answered
             if logged[rid]["status"] != 200 or logged[rid]["outcome"] != "success"
             or logged[rid]["charge_nano"] <= 0]
    assert not wrong, f"answered 200 but logged otherwise: {wrong[:5]}"
    charged_elsewhere = [dict(r) for rid, r in logged.items() if rid not in answered and r["charge_nano"]]
    assert not charged_elsewhere, f"charged without a 200: {charged_elsewhere[:5]}"
    charged = sum(int(logged[rid]["charge_nano"]) for rid in answered)
    assert user is not None and user["used_nano"] == charged
    assert user["balance_nano"] == balance_nano - charged >= 0
    assert held == 0, f"{held} reservations still held after both replicas stopped"
    audit = fleet.audit()
    assert audit.returncode == 0, audit.stdout + audit.stderr
    return {"answered": len(answered), "logged": len(logged), "charged_calls": len(answered),
            "charged_nano": charged}
