"""Hostile upstreams (issue 32, point 4, the upstream side), media tasks. A video upstream
(scripted: it speaks just enough of the video-A task API) finishes a task and answers its mp4 with
a redirect elsewhere: the one place the gateway follows redirects, only through the callbacks'
SSRF guard (``tasks.callback_allowlist``: loopback is not public) and never with the upstream's
credential or its configured headers. A failed download, and a submission answered with a flood
of headers, a gzip bomb or a redirect, are clean 502s (task calls share the relay's limits).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import orjson
import pytest
import pytest_asyncio

from tests.conftest import GatewayHandle, MakeConfig, Reply, StartGateway
from tests.hostile.fronting import HEALTHZ_SLACK_S, LIMITS, RSS_GROWTH_BOUND, json_answer
from tests.hostile.upstream import (
    MIB,
    Connection,
    Handler,
    HealthzSampler,
    HostileUpstream,
    PeakRss,
    answer_once,
    gzip_bomb,
    log_faults,
)

SECRET_KEY = "sk-media-secret-4711"
SECRET_HEADER = "org-secret-0815"
VIDEO = b"\x00\x00\x00\x18ftypmp42" + bytes(1000)


def video_upstream(location: Callable[[], str], mp4: bytes | None = None,
                   submitted: bytes | None = None) -> Handler:
    """Submissions get task ``up-1`` (or the answer ``submitted``), which is at once completed;
    its mp4 answers 302 to ``location()`` (or ``mp4``)."""

    async def handle(conn: Connection) -> None:
        while (request := await conn.request()) is not None:
            path = request.target.split("?")[0]
            if path.endswith(".mp4"):
                await conn.send(mp4 or b"HTTP/1.1 302 Found\r\nLocation: %b\r\nContent-Length: 0\r\n\r\n"
                                % location().encode())
            elif request.method == "POST":
                await conn.send(submitted or json_answer(b'{"taskId": "up-1"}'))
            else:
                done = {"id": "up-1", "status": "completed",
                        "data": {"results": ["https://files.example/up-1.mp4"], "processing_time": 1.0,
                                 "duration": 5}}
                await conn.send(json_answer(orjson.dumps(done)))

    return handle


async def serve_video(conn: Connection) -> None:
    while await conn.request() is not None:
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\nContent-Length: %d\r\n\r\n%b"
                        % (len(VIDEO), VIDEO))


StartMedia = Callable[..., Awaitable[GatewayHandle]]


@pytest_asyncio.fixture
async def media_gateway(gateway_server: StartGateway, make_config: MakeConfig,
                        caplog: pytest.LogCaptureFixture) -> StartMedia:
    """``await media_gateway(upstream_url, allowlist=[...])``: model ``videoa-2-5`` on the scripted
    upstream, which gets a secret key and a secret header of its own; a user and a key."""
    caplog.set_level(logging.INFO)

    async def start(upstream_url: str, allowlist: list[str]) -> GatewayHandle:
        gw = await gateway_server(make_config(
            extra_models=[{"id": "videoa-2-5", "price": {"per_second": 0.05}}],
            extra_upstreams=[{"name": "hostile-videoa", "protocol": "videoa", "base_url": upstream_url,
                              "api_key": SECRET_KEY, "headers": {"X-Org-Secret": SECRET_HEADER},
                              "models": ["videoa-2-5"]}],
            tasks={"poll_first_s": 0.02, "poll_interval_s": 0.05, "timeout_s": 30,
                   "callback_allowlist": allowlist}, limits=LIMITS, routing={"max_attempts": 1}))
        gw.user = await gw.create_user(quota_usd=10)
        gw.key_record = await gw.create_key(gw.user["id"], name="media")
        return gw

    return start


async def download(gw: GatewayHandle) -> Reply:
    """Submit a video, wait for it, download it through the gateway."""
    body = {"model": "videoa-2-5", "input": {"prompt": "a redirect"}}
    submitted = await gw.request("POST", "/videoa/v1/videos/generations", json=body, key=gw.key)
    assert submitted.status == 200, submitted.text
    task_id = submitted.json()["taskId"]
    deadline = time.monotonic() + 10
    while True:
        task = (await gw.request("GET", f"/videoa/v1/tasks/{task_id}", key=gw.key)).json()
        if task["status"] == "completed":
            break
        assert task["status"] != "failed" and time.monotonic() < deadline, task
        await asyncio.sleep(0.02)
    [url] = task["data"]["results"]
    return await gw.request("GET", url.removeprefix(gw.base_url), key=gw.key)


async def measured_download(gw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> Reply:
    """``download`` with /healthz sampled and peak memory watched, as every attack is."""
    sampler = HealthzSampler(gw.http, gw.base_url)
    idle = await sampler.idle_p99()
    caplog.clear()
    with PeakRss() as rss:
        async with sampler.running():
            reply = await download(gw)
    assert sampler.p99 <= idle + HEALTHZ_SLACK_S, (f"idle p99 {idle * 1000:.1f} ms", sampler.stats())
    assert rss.growth_bytes < RSS_GROWTH_BOUND, f"peak RSS grew {rss.growth_bytes / MIB:.0f} MiB"
    return reply


async def assert_unharmed(gw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> None:
    chat = {"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}]}
    assert (await gw.request("POST", "/v1/chat/completions", json=chat, key=gw.key)).status == 200
    assert log_faults(caplog.records) == []
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET_KEY not in logged and SECRET_HEADER not in logged


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_redirect_to_a_private_address_is_refused(media_gateway: StartMedia, host: str,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Loopback is not a public address and is not admitted: nothing is sent there (an IP literal
    is checked by the gateway itself, a host name on the addresses it resolves to)."""
    async with HostileUpstream(serve_video) as files:
        async with HostileUpstream(video_upstream(lambda: f"http://{host}:{files.port}/up-1.mp4")) as up:
            gw = await media_gateway(up.base_url, allowlist=[])
            reply = await measured_download(gw, caplog)
        assert reply.status == 502, reply.text
        error = reply.json()["error"]
        assert error["message"] and "Traceback" not in reply.text, error
        assert SECRET_KEY not in reply.text and SECRET_HEADER not in reply.text
        assert files.received == [], "the download followed a redirect past the SSRF guard"
        # the operator learns which upstream sent its download somewhere refused
        named = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and "hostile-videoa" in r.getMessage()]
        assert len(named) == 1, named
    await assert_unharmed(gw, caplog)


async def test_an_admitted_redirect_carries_no_upstream_credential(
        media_gateway: StartMedia, caplog: pytest.LogCaptureFixture) -> None:
    async with HostileUpstream(serve_video) as files:
        async with HostileUpstream(video_upstream(lambda: f"http://127.0.0.1:{files.port}/up-1.mp4")) as up:
            gw = await media_gateway(up.base_url, allowlist=["127.0.0.1"])
            reply = await measured_download(gw, caplog)
        assert reply.status == 200 and reply.body == VIDEO, reply.status
        mp4_asked = [r for r in up.received if r.target.endswith(".mp4")]
        assert mp4_asked and mp4_asked[0].headers["authorization"] == f"Bearer {SECRET_KEY}"
        assert mp4_asked[0].headers["x-org-secret"] == SECRET_HEADER
        [fetched] = files.received
        assert "authorization" not in fetched.headers and "x-org-secret" not in fetched.headers, fetched
        values = " ".join(fetched.headers.values())
        assert SECRET_KEY not in values and SECRET_HEADER not in values, fetched.headers
    await assert_unharmed(gw, caplog)


FLOOD = b"HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\n" + b"X-Flood: 1\r\n" * 200_000 + b"\r\n"


@pytest.mark.parametrize("fault", ["mp4 answers 503", "redirected to 200,000 headers"])
async def test_a_failed_download_is_a_clean_502(media_gateway: StartMedia, fault: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """The upstream fails the mp4 itself, or redirects (admitted) to a place whose head is over
    the limits: the client gets a 502 in its envelope, one warning names the upstream."""
    busy = json_answer(b'{"error": {"message": "busy"}}', "503 Service Unavailable")
    async with HostileUpstream(answer_once(FLOOD)) as files:
        location = f"http://127.0.0.1:{files.port}/up-1.mp4"
        mp4 = None if fault.startswith("redirected") else busy
        async with HostileUpstream(video_upstream(lambda: location, mp4)) as up:
            gw = await media_gateway(up.base_url, allowlist=["127.0.0.1"])
            reply = await measured_download(gw, caplog)
        assert reply.status == 502 and reply.json()["error"]["message"], reply.text
        named = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and "hostile-videoa" in r.getMessage()]
        assert len(named) == 1, named
    await assert_unharmed(gw, caplog)


@pytest.mark.parametrize("fault", ["200,000 headers", "a gzip bomb", "a redirect"])
async def test_a_hostile_answer_to_a_submission(media_gateway: StartMedia, fault: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """Task calls (submit, poll) share the text relay's limits: a submission answered with a
    flood of headers, a gzip bomb or a redirect is a clean 502, nothing kept, one warning."""
    bomb = gzip_bomb()
    answers = {"200,000 headers": FLOOD,
               "a gzip bomb": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip"
                              b"\r\nContent-Length: %d\r\n\r\n%b" % (len(bomb), bomb),
               "a redirect": b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:9/\r\n"
                             b"Content-Length: 0\r\n\r\n"}
    async with HostileUpstream(video_upstream(lambda: "", submitted=answers[fault])) as up:
        gw = await media_gateway(up.base_url, allowlist=[])
        sampler = HealthzSampler(gw.http, gw.base_url)
        idle = await sampler.idle_p99()
        caplog.clear()
        body = {"model": "videoa-2-5", "input": {"prompt": "hostile"}}
        with PeakRss() as rss:
            async with sampler.running():
                reply = await gw.request("POST", "/videoa/v1/videos/generations", json=body, key=gw.key)
    assert reply.status == 502 and reply.json()["error"]["message"], reply.text
    assert sampler.p99 <= idle + HEALTHZ_SLACK_S, (f"idle p99 {idle * 1000:.1f} ms", sampler.stats())
    assert rss.growth_bytes < RSS_GROWTH_BOUND, f"peak RSS grew {rss.growth_bytes / MIB:.0f} MiB"
    named = [r.getMessage() for r in caplog.records
             if r.levelno == logging.WARNING and "hostile-videoa" in r.getMessage()]
    assert len(named) == 1, named
    assert (await gw.admin("GET", f"/admin/users/{gw.user['id']}")).json()["quota_usd"] == 10
    await assert_unharmed(gw, caplog)
