"""Hostile upstreams (issue 32, point 4, the upstream side), the answer itself: a flood of headers,
a 50 MB header line, a gzip bomb, 1xx answers, 101, a redirect, a body dripped a byte a second, a
stream that never ends, Content-Length beside Transfer-Encoding, broken chunk sizes.

Each attack goes through a real gateway (small limits in its config, so that the point is reached
fast) to a ``HostileUpstream`` scripted byte by byte, from the openai SDK, on upstreams of the chat,
messages and v1beta protocols at once (``tests.hostile.fronting``). Each asserts what the issue
asks: the client gets a clean 502 in its own envelope, ``/healthz`` answers within 100 ms of its
idle p99 meanwhile, this process's peak memory grows far less than the attack would cost, no
traceback or asyncio transport error is logged, one WARNING names the upstream, and the next call
to a healthy upstream is served.

The connection's faults (TLS, an address that never answers, a stale keep-alive connection) are
``test_hostile_connection.py``; media tasks (downloads, the one place redirects are followed, and
submissions) ``test_hostile_media.py``.
"""

from __future__ import annotations

import logging
import time

import orjson
import pytest

from tests.hostile.fronting import (
    BOTH,
    COMPLETION,
    HEALTHZ_SLACK_S,
    PROTOCOLS,
    TOTAL_S,
    StartFront,
    answer_every_request,
    chat,
    front,
    survive,
)
from tests.hostile.upstream import (
    MIB,
    Connection,
    HealthzSampler,
    HostileUpstream,
    answer_once,
    gzip_bomb,
    log_faults,
)

__all__ = ["front"]  # the fixture

# --- the answer's head --------------------------------------------------------------------------------

async def test_a_flood_of_200000_headers(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    flood = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Flood: 1\r\n" * 200_000
             + b"Content-Length: 2\r\n\r\n{}")
    async with HostileUpstream(answer_once(flood)) as up:
        await survive(await front(up.base_url), caplog, streams=BOTH)


async def test_one_50_mb_header_line(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    block = b"a" * (64 * 1024)
    line = [b"HTTP/1.1 200 OK\r\nX-Huge: ", *[block] * (50 * MIB // len(block)), b"\r\n\r\n{}"]
    async with HostileUpstream(answer_once(*line)) as up:
        await survive(await front(up.base_url), caplog, streams=BOTH)


async def test_a_gzip_bomb(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    bomb = gzip_bomb()
    assert len(bomb) < 320 * 1024
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(bomb))
    async with HostileUpstream(answer_once(head, bomb)) as up:
        await survive(await front(up.base_url), caplog, streams=BOTH)


async def test_101_switching_protocols(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    async def switch(conn: Connection) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                            b"Connection: Upgrade\r\n\r\n\x81\x05hello")
            await conn.closed_by_peer(within_s=10)

    async with HostileUpstream(switch) as up:
        await survive(await front(up.base_url), caplog, streams=BOTH)


async def test_informational_answers_forever(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    async def informational(conn: Connection) -> None:
        if await conn.request() is not None:
            early_hints = b"HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"
            while await conn.send(b"HTTP/1.1 100 Continue\r\n\r\n", early_hints, pace_s=0.02):
                pass

    async with HostileUpstream(informational) as up:
        await survive(await front(up.base_url), caplog, within_s=TOTAL_S + 1.0, streams=BOTH)


async def test_a_redirect_is_a_failed_attempt(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    """Redirected to a working upstream: a failed attempt all the same; the POST is never sent on."""
    kinds = {"/v1/chat/completions": b"307 Temporary Redirect", "/v1/messages": b"308 Permanent Redirect"}
    async with HostileUpstream(answer_every_request) as elsewhere:
        async def redirect(conn: Connection) -> None:
            request = await conn.request()
            if request is not None:
                status = kinds.get(request.target.split("?")[0], b"302 Found")  # v1beta's
                await conn.send(b"HTTP/1.1 %b\r\nLocation: %b%b\r\nContent-Length: 0\r\n\r\n"
                                % (status, elsewhere.base_url.encode(), request.target.encode()))

        async with HostileUpstream(redirect) as up:
            await survive(await front(up.base_url), caplog, streams=BOTH)
            assert len(up.received) == 2 * len(PROTOCOLS)
    assert elsewhere.received == [], "a redirect was followed"


# --- the answer's body --------------------------------------------------------------------------------

async def test_a_huge_body_dripped(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    async def drip(conn: Connection) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 1000000000\r\n\r\n")
            await conn.drip(b'{"id": "' + b"x" * 1000, every_s=1.0)

    async with HostileUpstream(drip) as up:
        attacked = await survive(await front(up.base_url), caplog, within_s=TOTAL_S + 1.0,
                                 streams=BOTH)
    assert all(o.elapsed_s > TOTAL_S - 0.2 for o in attacked.outcomes), "cut before total_s?"


async def test_a_stream_that_never_ends(front: StartFront, caplog: pytest.LogCaptureFixture) -> None:
    """Output every 0.2 s, for ever: within idle_s all along, so total_s is what ends it, after
    output (a 200 whose stream ends in an error event)."""
    chunk = orjson.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "up-model",
                          "choices": [{"index": 0, "delta": {"content": "a"}}]})

    async def endless(conn: Connection) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n")
            event = b"data: %b\n\n" % chunk
            while await conn.send(b"%x\r\n%b\r\n" % (len(event), event), pace_s=0.2):
                pass

    async with HostileUpstream(endless) as up:
        fronted = await front(up.base_url, protocols=("chat",))
        sampler = HealthzSampler(fronted.gw.http, fronted.gw.base_url)
        idle = await sampler.idle_p99()
        caplog.clear()
        body = {"model": "hostile-chat", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        started = time.perf_counter()
        async with sampler.running():
            reply = await fronted.gw.request("POST", "/v1/chat/completions", json=body, key=fronted.gw.key)
        elapsed = time.perf_counter() - started
    assert reply.status == 200 and b'"content":"a"' in reply.body, reply.body[:300]
    assert b'"error"' in reply.body and b"Traceback" not in reply.body, reply.body[-300:]
    assert TOTAL_S - 0.2 < elapsed < TOTAL_S + 1.0, elapsed
    assert sampler.p99 <= idle + HEALTHZ_SLACK_S, sampler.stats()
    named = [r.getMessage() for r in caplog.records
             if r.levelno == logging.WARNING and "hostile-chat" in r.getMessage()]
    assert len(named) == 1, named
    assert log_faults(caplog.records) == []
    assert (await chat(fronted.client, "sim-chat")).status == 200


async def test_content_length_beside_transfer_encoding(front: StartFront,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    chunked = b"%x\r\n%b\r\n0\r\n\r\n" % (len(COMPLETION), COMPLETION)
    both = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunked)
    async with HostileUpstream(answer_once(both)) as up:
        await survive(await front(up.base_url), caplog, streams=BOTH)


@pytest.mark.parametrize("size", [b"zz", b"ffffffffffffffffffffffff", b"-1"])
async def test_bad_chunk_sizes(front: StartFront, caplog: pytest.LogCaptureFixture, size: bytes) -> None:
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
              + size + b"\r\n" + COMPLETION + b"\r\n0\r\n\r\n")
    async with HostileUpstream(answer_once(answer)) as up:
        await survive(await front(up.base_url), caplog, streams=BOTH)
