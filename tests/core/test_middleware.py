"""Request ids on every response, family envelopes for routing errors, body limits, access log,
and the last-resort exception handling."""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import pytest_asyncio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.edge.http import endpoint, new_request_id, read_json_body, request_id
from gateway.hooks.specs import hookimpl
from gateway.relay.families import (
    MULTIPART_SLACK,
    FamilyRegistry,
    WireFamily,
    bearer_token,
    render_default_error,
)
from gateway.runtime.context import Gateway
from gateway.runtime.errors import GatewayError
from gateway.settings.config import LimitsConfig

from .envelopes import assert_error


class UploadFamily:
    """A family whose one upload path has its own body limit (as an audio family would declare)."""

    name = "upload"
    credential_hint = "the Authorization header"

    def owns_path(self, path: str) -> bool:
        return path == "/upload"

    def credential(self, request: Request) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: Request) -> None:
        return None

    def render_error(self, err: GatewayError) -> bytes:
        return render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return limits.transcription_bytes + MULTIPART_SLACK


class Boom:
    """Routes that fail in the ways a buggy plugin could."""

    @hookimpl
    def gateway_families(self) -> list[WireFamily]:
        return [UploadFamily()]

    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        @endpoint("messages")
        async def wrapped(request: Request) -> Response:
            raise RuntimeError("secret internals sk-should-not-leak")

        async def bare(request: Request) -> Response:  # not wrapped in endpoint: ErrorGuard answers
            raise ZeroDivisionError("boom")

        @endpoint("chat")
        async def echo(request: Request) -> Response:
            body = await read_json_body(request)
            return JSONResponse({"bytes": len(body), "request_id": request_id(request)})

        return [Route("/probe/messages-boom", wrapped, methods=["POST"]),
                Route("/probe/bare", bare, methods=["GET"]),
                Route("/echo", echo, methods=["POST"]),
                Route("/upload", echo, methods=["POST"])]


@pytest_asyncio.fixture
async def boom(gateway_server: Any, make_config: Any) -> Any:
    config = make_config(limits={"json_body_bytes": 1000, "transcription_bytes": 2000})
    return await gateway_server(config, extra_plugins=[Boom()])


async def test_every_response_carries_a_request_id(boom: Any) -> None:
    replies = [
        await boom.request("GET", "/healthz"),
        await boom.request("GET", "/metrics"),
        await boom.request("GET", "/no/such/path"),
        await boom.request("DELETE", "/healthz"),
        await boom.request("POST", "/echo", data=b"x" * 2000),
        await boom.request("POST", "/probe/messages-boom", json={}),
        await boom.admin("GET", "/admin/users"),
        await boom.request("GET", "/admin/users"),
    ]
    assert [r.status for r in replies] == [200, 200, 404, 405, 413, 500, 200, 401]
    ids = [r.headers["X-Service-Request-Id"] for r in replies]
    assert all(i.startswith("req_") and len(i) == 36 for i in ids)
    assert len(set(ids)) == len(ids)


def test_request_ids_are_unique_across_refills_and_forked_workers() -> None:
    """Ids come from a buffer of random bytes read 4 KiB at a time: past a refill they stay
    unique, and a forked worker does not replay the ids its parent read ahead."""
    ids = [new_request_id() for _ in range(1000)]  # two refills and more
    assert len(set(ids)) == 1000 and all(re.fullmatch(r"req_[0-9a-f]{32}", i) for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, " ".join(new_request_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    parent = [new_request_id() for _ in range(8)]
    assert len(child) == 8 and not set(child) & set(parent)


def test_request_ids_sort_by_time() -> None:
    """The first 12 hex digits are the time in milliseconds, so that ids handed out later sort
    after earlier ones and the request log's index on them grows at its end (not at random)."""
    before = time.time_ns() // 1_000_000
    first = new_request_id()
    time.sleep(0.002)
    second = new_request_id()
    after = time.time_ns() // 1_000_000
    assert before <= int(first[4:16], 16) < int(second[4:16], 16) <= after
    assert first < second
    assert len({new_request_id()[16:] for _ in range(100)}) == 100  # the random part


async def test_healthz(boom: Any) -> None:
    reply = await boom.request("GET", "/healthz")
    assert reply.status == 200 and reply.json() == {"status": "ok"}


@pytest.mark.parametrize(("method", "path", "family", "status", "code"), [
    ("GET", "/v1/nothing", "chat", 404, "not_found"),
    ("POST", "/v1/messages/nothing", "messages", 404, "not_found"),
    ("GET", "/v1beta/nothing", "v1beta", 404, "not_found"),
    ("POST", "/v1/models/sim-gemini:noSuchMethod", "v1beta", 404, "not_found"),
    ("PUT", "/healthz", "chat", 405, "method_not_allowed"),
    ("GET", "/probe/messages-boom", "chat", 405, "method_not_allowed"),
    ("POST", "/admin/users/1", "chat", 405, "method_not_allowed"),
])
async def test_routing_errors_use_the_family_of_the_path(boom: Any, method: str, path: str, family: str,
                                                         status: int, code: str) -> None:
    reply = await boom.request(method, path)
    assert_error(reply, family, status, code)
    if status == 405:
        assert reply.headers["Allow"]


async def test_unexpected_error_is_a_500_without_internals(boom: Any,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="gateway.runtime.errors"):
        reply = await boom.request("POST", "/probe/messages-boom", json={})
    inner = assert_error(reply, "messages", 500, "internal_error")
    assert "secret internals" not in reply.text and "RuntimeError" not in reply.text
    assert reply.headers["X-Service-Request-Id"] in inner["message"]
    logged = [r for r in caplog.records if r.name == "gateway.runtime.errors"]
    assert logged and logged[0].exc_info is not None  # the trace is in the log, not the body

    reply = await boom.request("GET", "/probe/bare")
    assert_error(reply, "chat", 500, "internal_error")
    assert "boom" not in reply.text


async def test_handle_exception_hook_can_be_overridden(gateway_server: Any) -> None:
    class Override(Boom):
        @hookimpl
        def gateway_handle_exception(self, request: Request, exc: BaseException, family: str) -> Response:
            return JSONResponse({"custom": family, "kind": type(exc).__name__}, status_code=503)

    handle = await gateway_server(extra_plugins=[Override()])
    reply = await handle.request("POST", "/probe/messages-boom", json={})
    assert reply.status == 503 and reply.json() == {"custom": "messages", "kind": "RuntimeError"}
    assert reply.headers["X-Service-Request-Id"].startswith("req_")


async def test_body_limit_by_content_length(boom: Any) -> None:
    assert (await boom.request("POST", "/echo", data=b"x" * 1000)).json()["bytes"] == 1000
    assert_error(await boom.request("POST", "/echo", data=b"x" * 1001), "chat", 413, "request_too_large")
    # Refused from Content-Length alone, before routing, in the envelope of the path's family.
    assert_error(await boom.request("POST", "/v1/messages", data=b"x" * 1001), "messages", 413,
                 "request_too_large")
    assert_error(await boom.request("POST", "/v1beta/models/sim-gemini:generateContent", data=b"x" * 1001),
                 "v1beta", 413, "request_too_large")
    # The upload family declares its own limit (2000 here, plus 1 MB of multipart slack).
    assert (await boom.request("POST", "/upload", data=b"x" * 5000)).status == 200


def test_limits_per_path() -> None:
    limits = LimitsConfig(json_body_bytes=10, transcription_bytes=20, video_submit_bytes=30)
    families = FamilyRegistry([UploadFamily()])
    assert families.body_limit("/v1/chat/completions", limits) == 10
    assert families.body_limit("/upload", limits) == 20 + MULTIPART_SLACK
    defaults = LimitsConfig()
    assert (defaults.json_body_bytes, defaults.transcription_bytes, defaults.video_submit_bytes) == (
        32 * 2**20, 25 * 2**20, 200 * 2**20)


async def test_body_limit_counts_chunked_uploads(boom: Any) -> None:
    async def chunks(total: int) -> AsyncIterator[bytes]:
        for _ in range(total // 100):
            yield b"y" * 100

    ok = await boom.request("POST", "/echo", data=chunks(900))
    assert ok.status == 200 and ok.json()["bytes"] == 900
    assert_error(await boom.request("POST", "/echo", data=chunks(5000)), "chat", 413, "request_too_large")


async def test_empty_json_body_is_400(boom: Any) -> None:
    assert_error(await boom.request("POST", "/echo", data=b""), "chat", 400, "invalid_request")


async def test_access_log_line(boom: Any, caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-" + "q" * 40
    with caplog.at_level(logging.INFO, logger="gateway.access"):
        reply = await boom.request("GET", "/v1beta/nothing", params={"key": secret, "alt": "sse"},
                                   headers={"x-goog-api-key": secret})
    lines = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"]
    assert len(lines) == 1
    line = lines[0]
    assert line["method"] == "GET" and line["status"] == 404
    assert line["path"] == "/v1beta/nothing?key=REDACTED&alt=sse"
    assert line["request_id"] == reply.headers["X-Service-Request-Id"]
    assert line["client_ip"] == "127.0.0.1" and line["duration_ms"] >= 0
    assert all(secret not in r.getMessage() for r in caplog.records)
