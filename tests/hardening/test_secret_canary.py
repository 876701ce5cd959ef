"""Property 4: secret canaries. A client key and upstream keys with recognisable random parts go
through success, 401, upstream 5xx, aborted and ``?key=`` (plain and percent-encoded) paths of
each text family; then the log (every record, with stack traces), the database files, every
answer body and header, the task callbacks and ``/metrics`` must hold none of them.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import ADMIN_KEY, MakeConfig, SimulatorHandle, StartGateway
from tests.hardening.conftest import raw_http, user_and_key

PRICE = {"input_per_mtok": 1, "output_per_mtok": 1}


def _upstreams(sim: str, ok_key: str, fail_key: str, slow_key: str) -> list[dict[str, Any]]:
    out = []
    for protocol, real in (("chat", "sim-chat"), ("messages", "sim-claude"), ("v1beta", "sim-gemini")):
        for kind, key in (("ok", ok_key), ("fail", fail_key), ("slow", slow_key)):
            out.append({"name": f"canary-{kind}-{protocol}", "protocol": protocol, "base_url": sim,
                        "api_key": key, "models": {f"canary-{kind}-{protocol}": real}})
    return out


def _read_all(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("gateway.db*")))


async def test_no_secret_reaches_logs_db_bodies_or_metrics(
        gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle,
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    up_secret = "CANARYup" + secrets.token_hex(12)
    ok_key, fail_key, slow_key = (f"sk-sim-{up_secret}", f"sk-sim-fail503-{up_secret}",
                                  f"sk-sim-tok200-{up_secret}")
    upstreams = _upstreams(simulator.base_url, ok_key, fail_key, slow_key)
    models = [{"id": u["name"], "price": PRICE} for u in upstreams]
    gw = await user_and_key(await gateway_server(make_config(extra_models=models, extra_upstreams=upstreams)))
    client_secret = gw.key[7:-5]  # what no masked form shows
    wrong_key = "sk-" + "CANARYwrong" + secrets.token_hex(16)
    seen: list[bytes] = []

    async def call(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> int:
        reply = await gw.request(method, path, json=body, headers=headers)
        seen.append(reply.body + str(dict(reply.headers)).encode())
        return reply.status

    async def raw(path: str, body: bytes, headers: str = "") -> None:
        data = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}"
                f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
        seen.append(await raw_http(gw.base_url, data))

    gemini = b'{"contents":[{"parts":[{"text":"sim:tokens=3 hi"}]}]}'
    for kind in ("ok", "fail"):
        for key in (gw.key, wrong_key):
            bearer = {"Authorization": f"Bearer {key}"}
            hello = [{"role": "user", "content": "sim:tokens=3 hi"}]
            anthropic = {"x-api-key": key, "anthropic-version": "2023-06-01"}
            chat = {"model": f"canary-{kind}-chat", "messages": hello}
            await call("POST", "/v1/chat/completions", chat, bearer)
            await call("POST", "/v1/chat/completions",
                       {"model": f"canary-{kind}-messages", "stream": True, "messages": hello}, bearer)
            for target in ("messages", "v1beta"):
                await call("POST", "/v1/messages",
                           {"model": f"canary-{kind}-{target}", "max_tokens": 5, "messages": hello},
                           anthropic)
            for query in ("key", "%6Bey", "ke%79", "%6B%65%79"):
                for model in (f"canary-{kind}-v1beta", f"canary-{kind}-chat"):
                    await raw(f"/v1beta/models/{model}:generateContent?{query}={key}", gemini)
                    await raw(f"/v1beta/models/{model}:streamGenerateContent?alt=sse&{query}={key}", gemini)
            await raw("/v1beta/models/canary-ok-v1beta:generateContent", gemini, f"x-goog-api-key: {key}\r\n")
    # Aborted: a slow stream the client leaves after the first bytes, and an upload cut short.
    for model in ("canary-slow-chat", "canary-slow-v1beta"):
        async with aiohttp.ClientSession() as session, session.post(
                gw.base_url + "/v1/chat/completions", headers={"Authorization": f"Bearer {gw.key}"},
                json={"model": model, "stream": True,
                      "messages": [{"role": "user", "content": "sim:tokens=50 x"}]},
        ) as resp:
            await resp.content.readany()
    host, port = gw.base_url.removeprefix("http://").split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"POST /v1beta/models/canary-ok-v1beta:generateContent?key={gw.key} HTTP/1.1\r\n"
                 f"Host: x\r\nContent-Length: 1000\r\n\r\n{{".encode())
    await writer.drain()
    writer.transport.abort()
    await asyncio.sleep(1.0)  # the aborted streams end and settle

    metrics = await gw.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    seen.append(metrics.body)
    logs = await gw.admin("GET", "/admin/logs?limit=500")
    seen.append(logs.body)
    await gw.stop()  # the meter flushes: every row is in the database

    stores = {"answers": b"\n".join(seen), "log": caplog.text.encode(),
              "database": await asyncio.to_thread(_read_all, tmp_path)}
    for secret in (client_secret, up_secret, wrong_key[3:]):
        for where, data in stores.items():
            assert secret.encode() not in data, f"a secret is in the {where}"
    assert metrics.status == 200 and b"gateway_" in metrics.body
    assert len(seen) > 80
    assert b"key=REDACTED" in stores["log"] and b"%6Bey=REDACTED" in stores["log"]  # the paths were logged
