"""Secrets on both sides (issue 32, point 5). Through a scripted upstream (aiohttp.web in this
test) that echoes every credential it was sent, plus other upstreams' secrets, in its errors:

* an upstream error relayed to a client (whole answers, streams, both the fast and the translated
  path, a 200 carrying an error, media task refusals and failure reasons) holds no configured
  secret and no ``Bearer``/``Basic`` credential, only the placeholder;
* the access log redacts credential query parameters however they are spelled;
* an upstream with an empty ``api_key`` and ``user:pass@`` in its ``base_url`` is called with
  Basic auth, not an empty credential header of its protocol;
* ``gateway check-config`` and ``/admin/upstreams`` never show URL credentials (the start-up line
  of ``gateway serve`` is checked in ``test_serve_start_up_line_hides_url_credentials``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gateway.cli.main import main as cli_main
from gateway.runtime.secrets_scrub import PLACEHOLDER
from tests import loopback
from tests.conftest import GatewayHandle, MakeConfig, StartGateway
from tests.core.test_serve import Server, e2e_config
from tests.hardening.conftest import raw_http, user_and_key
from tests.hardening.test_secret_canary import assert_absent

PRICE = {"input_per_mtok": 1, "output_per_mtok": 1}
CREDENTIAL_HEADERS = ("Authorization", "x-api-key", "x-goog-api-key", "X-Org-Token")


class Echo:
    """The scripted upstream: what it was sent (model and headers of each call), and the secrets
    it quotes back that it was never sent (another upstream's)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.quoted_extra = ""
        self.task_ids = 0

    def complaint(self, request: web.Request) -> str:
        sent = " ".join(f"{name}={request.headers.get(name, '')}" for name in CREDENTIAL_HEADERS)
        return f"rejected: {sent} {self.quoted_extra} try Bearer sk-unrelated{secrets.token_hex(8)}"

    async def text(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        model = request.match_info.get("model") or str(body.get("model", ""))
        self.calls.append((model, dict(request.headers)))
        said = self.complaint(request)
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
        if model.startswith("echo400"):
            return web.json_response(error, status=400)
        if model.startswith("errbody"):
            return web.json_response(error)
        if model.startswith("streamerr"):
            return await self.stream_with_error(request, model, said)
        if "v1beta" in request.path:
            return web.json_response({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]},
                                                      "finishReason": "STOP"}],
                                      "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1}})
        if request.path.endswith("/messages"):
            return web.json_response({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
                                      "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
                                      "usage": {"input_tokens": 1, "output_tokens": 1}})
        return web.json_response({"id": "c1", "object": "chat.completion", "created": 1, "model": model,
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": "hi"}}],
                                  "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    async def stream_with_error(self, request: web.Request, model: str, said: str) -> web.StreamResponse:
        """A stream in the upstream's own format: some output, then an in-band error quoting the
        credentials (relayed byte for byte to a client of the same format: the fast path)."""
        if "v1beta" in request.path:
            first = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}]}
            events = [b"data: " + orjson.dumps(first) + b"\n\n",
                      b"data: " + orjson.dumps({"error": {"code": 500, "message": said,
                                                           "status": "INTERNAL"}}) + b"\n\n"]
        elif request.path.endswith("/messages"):
            start = {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "usage": {"input_tokens": 1, "output_tokens": 0}}}
            events = [b"event: message_start\ndata: " + orjson.dumps(start) + b"\n\n",
                      b"event: error\ndata: " + orjson.dumps({"type": "error", "error": {
                          "type": "overloaded_error", "message": said}}) + b"\n\n"]
        else:
            chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model,
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}
            events = [b"data: " + orjson.dumps(chunk) + b"\n\n",
                      b"data: " + orjson.dumps({"error": {"message": said, "type": "server_error"}})
                      + b"\n\n"]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
        return response

    async def submit(self, request: web.Request) -> web.Response:
        prompt = str((await request.json()).get("prompt", ""))
        self.calls.append((prompt, dict(request.headers)))
        if "refuse-http" in prompt:
            return web.json_response({"description": self.complaint(request)}, status=400)
        if "refuse-code" in prompt:
            return web.json_response({"code": 4, "description": self.complaint(request)})
        self.task_ids += 1
        return web.json_response({"code": 1, "result": f"up-{self.task_ids}"})

    async def list_tasks(self, request: web.Request) -> web.Response:
        ids = (await request.json())["ids"]
        return web.json_response([{"id": i, "status": "FAILURE", "failReason": self.complaint(request),
                                   "description": self.complaint(request)} for i in ids])


@pytest_asyncio.fixture
async def echo() -> AsyncIterator[tuple[str, Echo]]:
    script = Echo()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", script.text)
    app.router.add_post("/v1/messages", script.text)
    app.router.add_post("/v1beta/models/{model}:{method}", script.text)
    app.router.add_post("/imagetask/submit/{kind}", script.submit)
    app.router.add_post("/imagetask/task/list-by-condition", script.list_tasks)
    async with loopback.serving(app, access_log=None) as base:
        yield base, script


def _with_userinfo(base: str, user: str, password: str) -> str:
    return base.replace("http://", f"http://{user}:{quote(password, safe='')}@")


async def test_relayed_upstream_errors_hold_no_secret(
        gateway_server: StartGateway, make_config: MakeConfig, echo: tuple[str, Echo],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base, script = echo
    tag = secrets.token_hex(10)
    keys = {protocol: f"sk-{protocol}-{tag}" for protocol in ("chat", "messages", "v1beta")}
    header_secret, other_key, other_password = f"org-{tag}x", f"sk-other-{tag}", f"pw@{tag}"
    upstreams: list[dict[str, Any]] = [
        {"name": f"echo-{protocol}", "protocol": protocol, "base_url": base, "api_key": key,
         "headers": {"X-Org-Token": header_secret},
         "models": {f"{kind}-{protocol}": f"{kind}-{protocol}"
                    for kind in ("echo400", "errbody", "streamerr")}}
        for protocol, key in keys.items()]
    # Never called: only its secrets, quoted back by the echo, must not get through either.
    upstreams.append({"name": "elsewhere", "protocol": "chat", "api_key": other_key, "models": [],
                      "base_url": _with_userinfo("http://127.0.0.1:9/v1", "alice", other_password)})
    basic = base64.b64encode(f"alice:{other_password}".encode()).decode()
    script.quoted_extra = f"other={other_key} pw={other_password} basic=Basic {basic}"
    models = [{"id": public, "price": PRICE} for up in upstreams for public in up["models"]]
    gw = await user_and_key(await gateway_server(make_config(extra_models=models, extra_upstreams=upstreams)))
    hello = [{"role": "user", "content": "hi"}]
    anthropic = {"x-api-key": gw.key, "anthropic-version": "2023-06-01"}
    gemini = {"contents": [{"parts": [{"text": "hi"}]}]}
    calls: list[tuple[str, dict[str, Any], dict[str, str], int]] = []
    for protocol in keys:
        for stream in (False, True):  # fast path for chat, translated for the others
            calls.append(("/v1/chat/completions", {"model": f"echo400-{protocol}", "messages": hello,
                                                    "stream": stream}, {}, 400))
        calls.append(("/v1/messages", {"model": f"echo400-{protocol}", "max_tokens": 5, "messages": hello},
                      anthropic, 400))
        calls.append((f"/v1beta/models/echo400-{protocol}:generateContent", gemini, {}, 400))
    # A same-format stream (the fast path relays its bytes) whose upstream sends an in-band error.
    calls.append(("/v1/chat/completions", {"model": "streamerr-chat", "messages": hello, "stream": True},
                  {}, 200))
    calls.append(("/v1/messages", {"model": "streamerr-messages", "max_tokens": 5, "messages": hello,
                                   "stream": True}, anthropic, 200))
    calls.append(("/v1beta/models/streamerr-v1beta:streamGenerateContent?alt=sse", gemini, {}, 200))
    # A 200 whose body is an error (read by the chat translator): the client gets a 502.
    calls.append(("/v1/messages", {"model": "errbody-chat", "max_tokens": 5, "messages": hello},
                  anthropic, 502))
    answers = []
    for path, body, headers, status in calls:
        reply = await gw.request("POST", path, json=body, headers=headers or None,
                                 key=None if headers else gw.key)
        assert reply.status == status, (path, body, reply.text)
        assert PLACEHOLDER.encode() in reply.body, reply.text  # the upstream's words, scrubbed
        answers.append(reply.body + str(dict(reply.headers)).encode())
    assert len(script.calls) >= len(calls)  # every one reached the echo
    stores = {"answers": b"\n".join(answers), "log": caplog.text.encode()}
    assert_absent([*keys.values(), header_secret, other_key, other_password, "sk-unrelated"], stores)


async def test_task_refusals_and_failure_reasons_hold_no_secret(
        gateway_server: StartGateway, make_config: MakeConfig, echo: tuple[str, Echo],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    base, _ = echo
    task_key = f"sk-task-{secrets.token_hex(10)}"
    upstreams = [{"name": "echo-image", "protocol": "imagetask", "base_url": base, "api_key": task_key,
                  "models": ["echo-image"]}]
    tasks = {"poll_first_s": 0.05, "poll_interval_s": 0.1, "timeout_s": 30}
    gw = await user_and_key(await gateway_server(make_config(
        extra_models=[{"id": "echo-image", "price": {"per_task": 0.05}}], extra_upstreams=upstreams,
        tasks=tasks)))
    seen = []
    for prompt in ("refuse-http", "refuse-code"):
        reply = await gw.request("POST", "/imagetask/submit/imagine", key=gw.key, json={"prompt": prompt})
        assert reply.status == 400 and PLACEHOLDER.encode() in reply.body, reply.text
        seen.append(reply.body)
    submitted = await gw.request("POST", "/imagetask/submit/imagine", key=gw.key, json={"prompt": "a cat"})
    assert submitted.status == 200, submitted.text
    fetch = f"/imagetask/task/{submitted.json()['result']}/fetch"
    for _ in range(300):
        reply = await gw.request("GET", fetch, key=gw.key)
        if b'"FAILURE"' in reply.body:
            break
        await asyncio.sleep(0.02)
    assert b'"FAILURE"' in reply.body and PLACEHOLDER.encode() in reply.body, reply.text
    seen.append(reply.body)
    assert_absent([task_key], {"answers": b"\n".join(seen), "log": caplog.text.encode()})


# Each spelling a reader may take for ``key`` (or another credential name), with its own secret.
SPELLINGS = ("k%00ey", "KEY", "Key", "api%5Fkey", "API%5FKEY", "key[]", "key%5B%5D", "%6Bey", "%256Bey",
             "k%20ey", "x-goog-api-key", "access_token", "sig", "%EF%BD%8B%EF%BD%85%EF%BD%99")


async def test_access_log_redacts_every_spelling_of_a_credential_query(
        gw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    planted = []
    for spelling in SPELLINGS:
        secret = f"SECRETq{secrets.token_hex(8)}"
        planted.append(secret)
        await raw_http(gw.base_url, (f"GET /v1beta/models?{spelling}={secret} HTTP/1.1\r\nHost: x\r\n"
                                     "Connection: close\r\n\r\n").encode())
    repeated, semicolon, hidden_eq = (f"SECRETr{secrets.token_hex(8)}" for _ in range(3))
    planted += [repeated, semicolon, hidden_eq]
    for query in (f"key=a{repeated}&key={repeated}", f"alt=sse;key={semicolon}", f"key%3D{hidden_eq}"):
        await raw_http(gw.base_url, (f"GET /v1beta/models?{query} HTTP/1.1\r\nHost: x\r\n"
                                     "Connection: close\r\n\r\n").encode())
    await asyncio.sleep(0.05)  # the access line is written once the response ended
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    assert len(lines) >= len(SPELLINGS) + 3
    assert sum(PLACEHOLDER in line for line in lines) >= len(SPELLINGS) + 3
    assert_absent(planted, {"log": caplog.text.encode()})


async def test_empty_api_key_leaves_the_urls_basic_auth(
        gateway_server: StartGateway, make_config: MakeConfig, echo: tuple[str, Echo]) -> None:
    base, script = echo
    password = f"p@ss:{secrets.token_hex(4)}"  # ``@`` and ``:`` percent-encoded in the URL
    with_userinfo = _with_userinfo(base, "bob", password)
    upstreams = [{"name": f"basic-{protocol}", "protocol": protocol, "base_url": with_userinfo, "api_key": "",
                  "models": {f"basic-{protocol}": f"ok-basic-{protocol}"}}
                 for protocol in ("chat", "messages", "v1beta")]
    upstreams.append({"name": "keyed-chat", "protocol": "chat", "base_url": with_userinfo,
                      "api_key": "sk-keyed-1234", "models": {"keyed-chat": "ok-keyed-chat"}})
    models = [{"id": up["name"], "price": PRICE} for up in upstreams]
    gw = await user_and_key(await gateway_server(make_config(extra_models=models, extra_upstreams=upstreams)))
    for up in upstreams:
        reply = await gw.request("POST", "/v1/chat/completions", key=gw.key,
                                 json={"model": up["name"], "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status == 200, reply.text
    sent = {model: {name.lower(): value for name, value in headers.items()}
            for model, headers in script.calls}
    basic = "Basic " + base64.b64encode(f"bob:{password}".encode()).decode()
    for protocol in ("chat", "messages", "v1beta"):
        headers = sent[f"ok-basic-{protocol}"]
        assert headers.get("authorization") == basic, headers
        assert "x-api-key" not in headers and "x-goog-api-key" not in headers, headers
    assert sent["ok-keyed-chat"]["authorization"] == "Bearer sk-keyed-1234"  # a key wins over the URL's


@pytest.mark.parametrize(("api_key", "expected"),
                         [("", "basic"), ("sk-keyed-task1", "Bearer sk-keyed-task1")])
async def test_task_upstream_with_url_credentials(
        gateway_server: StartGateway, make_config: MakeConfig, echo: tuple[str, Echo],
        api_key: str, expected: str) -> None:
    """Media task calls (aiohttp, which refuses URL credentials next to an Authorization header)
    follow the same rule: the key when there is one, else the URL's Basic auth."""
    base, script = echo
    upstreams = [{"name": "userinfo-image", "protocol": "imagetask", "api_key": api_key,
                  "base_url": _with_userinfo(base, "gina", "pw-1234"), "models": ["userinfo-image"]}]
    gw = await user_and_key(await gateway_server(make_config(
        extra_models=[{"id": "userinfo-image", "price": {"per_task": 0.05}}], extra_upstreams=upstreams)))
    reply = await gw.request("POST", "/imagetask/submit/imagine", key=gw.key, json={"prompt": "a cat"})
    assert reply.status == 200, reply.text
    basic = "Basic " + base64.b64encode(b"gina:pw-1234").decode()
    assert script.calls[-1][1].get("Authorization") == (basic if expected == "basic" else expected)


async def test_admin_upstreams_shows_no_url_credentials(
        gateway_server: StartGateway, make_config: MakeConfig) -> None:
    password, key = f"pw-{secrets.token_hex(8)}", f"sk-{secrets.token_hex(8)}"
    gw = await gateway_server(make_config(extra_upstreams=[
        {"name": "userinfo", "protocol": "chat", "api_key": key, "models": [],
         "base_url": f"https://carol:{password}@api.example.com/v1"}]))
    reply = await gw.admin("GET", "/admin/upstreams")
    assert reply.status == 200 and b"userinfo" in reply.body
    assert_absent([password, key, "carol"], {"answer": reply.body})


def _config_file(tmp_path: Path, base_urls: list[str]) -> tuple[Path, int]:
    """``config/gateway.yaml`` on free ports plus upstreams ``odd-<i>`` at ``base_urls``; the
    index of the first of them."""
    path, _, _ = e2e_config(tmp_path)
    raw = yaml.safe_load(path.read_text())
    first = len(raw["upstreams"])
    raw["upstreams"] += [{"name": f"odd-{i}", "protocol": "chat", "base_url": url, "api_key": "sk-x"}
                         for i, url in enumerate(base_urls)]
    path.write_text(yaml.safe_dump(raw))
    return path, first


def test_check_config_echoes_no_url_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    planted = [f"S{i}{secrets.token_hex(8)}" for i in range(5)]
    urls = [f"https://dave:{planted[0]}@api.example.com/v1?key={planted[1]}",
            f"https://api.example.com/v1?api%5Fkey={planted[2]}#access_token={planted[3]}",
            f"http://[::1/v1?token={planted[4]}",  # not a URL at all: a line, no traceback
            f"ftp://erin:{planted[0]}@files.example.com/"]
    path, first = _config_file(tmp_path, urls)
    assert cli_main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert all(f"upstreams[{first + i}].base_url" in err for i in range(len(urls))), err
    assert "Traceback" not in err
    assert_absent([*planted, "dave", "erin"], {"check-config output": err.encode()})


async def test_serve_start_up_line_hides_url_credentials(tmp_path: Path) -> None:
    password = f"pw-{secrets.token_hex(8)}"
    config, _ = _config_file(tmp_path, [f"https://frank:{password}@api.example.com/v1"])
    port = yaml.safe_load(config.read_text())["listen"]["port"]
    server = await Server.start(config)
    try:
        await server.wait_healthy(f"http://127.0.0.1:{port}")
        log = server.log_path.read_bytes()
        assert b"starting gateway" in log and b"odd-0 (chat, https://REDACTED@api.example.com/v1" in log, log
        assert_absent([password, "frank"], {"serve output": log + "".join(server.stdout).encode()})
    finally:
        assert await server.terminate() == 0
