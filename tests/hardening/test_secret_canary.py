"""Property 4: secret canaries. A client key, upstream keys and credentials in upstream base URLs
(``user:pass@``), with recognisable random parts, go through success, 401, upstream 5xx, aborted
and ``?key=`` (plain and percent-encoded) paths of each text family, and through media tasks
(image and music: success, failure, a refused submission) whose status changes are called back to
a local receiver; then the log (every record, with stack traces), the database files, every
answer body and header, every callback (path, headers, body) and ``/metrics`` must hold none of
them: neither as they are, nor percent-encoded, nor in base64 (at any alignment).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web

from tests import loopback
from tests.conftest import ADMIN_KEY, GatewayHandle, MakeConfig, SimulatorHandle, StartGateway
from tests.hardening.conftest import raw_http, user_and_key

PRICE = {"input_per_mtok": 1, "output_per_mtok": 1}


def forms(secret: str) -> list[bytes]:
    """``secret`` as it is, percent-encoded, and the part of its base64 (standard and url-safe)
    that does not depend on what precedes it, for each of the three alignments."""
    raw = secret.encode()
    found = {raw, urllib.parse.quote(secret, safe="").encode(), urllib.parse.quote_plus(secret).encode()}
    for pad in range(3):
        first, end = -(-8 * pad // 6), 8 * (pad + len(raw)) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            found.add(encode(b"\0" * pad + raw)[first:end])
    return sorted(found)


def assert_absent(secrets_: list[str], stores: Mapping[str, bytes]) -> None:
    for secret in secrets_:
        for form in forms(secret):
            for where, data in stores.items():
                assert form not in data, f"a secret ({form!r}) is in the {where}"


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
    # Credentials in the base URL too (sent as Basic auth where the protocol's key header is not
    # Authorization): they must not show anywhere either.
    url_secret = "CANARYurl" + secrets.token_hex(12)
    sim_url = simulator.base_url.replace("http://", f"http://canary:{url_secret}@")
    upstreams = _upstreams(sim_url, ok_key, fail_key, slow_key)
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
    assert_absent([client_secret, up_secret, url_secret, wrong_key[3:]], stores)
    assert metrics.status == 200 and b"gateway_" in metrics.body
    assert len(seen) > 80
    assert b"key=REDACTED" in stores["log"] and b"%6Bey=REDACTED" in stores["log"]  # the paths were logged


@pytest_asyncio.fixture
async def callbacks() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A callback receiver on loopback: its URL, and every request it got (line, headers, body)."""
    received: list[bytes] = []

    async def hook(request: web.Request) -> web.Response:
        head = f"{request.method} {request.path_qs}\n" + "".join(
            f"{name}: {value}\n" for name, value in request.headers.items())
        received.append(head.encode() + await request.read())
        return web.Response()

    app = web.Application()
    app.router.add_post("/{tail:.*}", hook)
    async with loopback.serving(app, access_log=None) as base:
        yield f"{base}/hook", received


FINAL = (b'"SUCCESS"', b'"FAILURE"')  # imagetask's and music's final statuses, as called back


async def _submit_tasks(gw: GatewayHandle, hook: str, wrong_key: str) -> list[bytes]:
    """Image and music tasks that succeed, fail and are refused, each with a callback; the
    answers (bodies and headers) to every submission and fetch."""
    seen: list[bytes] = []
    fetches: list[str] = []
    for key in (gw.key, wrong_key):
        for prompt in ("a lighthouse", "a lighthouse sim:taskfail", "a lighthouse sim:reject"):
            image = await gw.request("POST", "/imagetask/submit/imagine", key=key,
                                     json={"prompt": prompt, "notifyHook": hook, "state": "s"})
            music = await gw.request("POST", "/music/submit/music", key=key,
                                     json={"prompt": prompt, "model": "music_v4", "notify_hook": hook})
            for reply in (image, music):
                seen.append(reply.body + str(dict(reply.headers)).encode())
            if key == gw.key and "reject" not in prompt:
                assert image.status == 200 and music.status == 200, (image.text, music.text)
                fetches += [f"/imagetask/task/{image.json()['result']}/fetch",
                            f"/music/fetch/{music.json()['data']}"]
    for path in fetches:
        for _ in range(500):
            reply = await gw.request("GET", path, key=gw.key)
            if any(final in reply.body for final in FINAL):
                break
            await asyncio.sleep(0.02)
        seen.append(reply.body + str(dict(reply.headers)).encode())
    return seen


async def test_no_secret_reaches_task_callbacks(
        gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle,
        tmp_path: Path, caplog: pytest.LogCaptureFixture, callbacks: tuple[str, list[bytes]]) -> None:
    caplog.set_level(logging.DEBUG)
    hook, received = callbacks
    up_secret = "CANARYtask" + secrets.token_hex(12)
    url_secret = "CANARYurl" + secrets.token_hex(12)  # in the music upstream's base URL
    upstreams = [{"name": "canary-image", "protocol": "imagetask", "base_url": simulator.base_url,
                  "api_key": f"sk-sim-dur200-steps2-{up_secret}", "models": ["canary-image"]},
                 {"name": "canary-music", "protocol": "music",
                  "base_url": simulator.base_url.replace("http://", f"http://canary:{url_secret}@"),
                  "api_key": f"sk-sim-dur200-{up_secret}", "models": {"music_v4": "music_v4"}}]
    models = [{"id": name, "price": {"per_task": 0.05}} for name in ("canary-image", "music_v4")]
    tasks = {"poll_first_s": 0.05, "poll_interval_s": 0.1, "timeout_s": 30,
             "callback_allowlist": ["127.0.0.1"]}  # the receiver is on loopback
    gw = await user_and_key(await gateway_server(make_config(extra_models=models, extra_upstreams=upstreams,
                                                             tasks=tasks)))
    wrong_key = "sk-" + "CANARYwrong" + secrets.token_hex(16)
    seen = await _submit_tasks(gw, hook, wrong_key)
    # Two successes and two failures, each called back once it ends (and at earlier changes).
    for _ in range(500):
        if sum(final in r for r in received for final in FINAL) >= 4:
            break
        await asyncio.sleep(0.02)
    assert sum(final in r for r in received for final in FINAL) >= 4, received
    metrics = await gw.request("GET", "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    seen.append(metrics.body)
    await gw.stop()  # the meter and the callback outbox flush: every row is in the database

    stores = {"callbacks": b"\n".join(received), "answers": b"\n".join(seen), "log": caplog.text.encode(),
              "database": await asyncio.to_thread(_read_all, tmp_path)}
    assert_absent([gw.key[7:-5], up_secret, url_secret, wrong_key[3:]], stores)
    assert b"gateway_" in metrics.body and len(received) >= 8
