"""The harness of the bench's issue-32 scenarios: the replay's slow streams (a first-byte wait and a
pace, replayed as asked), its TLS front trusted through ``SSL_CERT_FILE`` alone (as the gateway and
the floor trust it in ``make bench``), and the slow streams' load generator counting what it saw."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import orjson
import pytest_asyncio

from bench import many_streams, replay, tls
from bench.scenarios import headers
from tests.conftest import SimulatorHandle

SLOW_BODY = orjson.dumps({"model": "sim-chat-ttft200-tok30", "stream": True,
                          "messages": [{"role": "user", "content": "sim:tokens=5 slow"}]})


@pytest_asyncio.fixture
async def front(simulator: SimulatorHandle) -> AsyncIterator[str]:
    server, recorder = await replay.start(0, simulator.base_url)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()
        await recorder.close()


async def test_a_slow_stream_is_replayed_with_its_first_byte_wait_and_pace(front: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(2):  # recorded, then replayed
            sent = time.perf_counter()
            async with session.post(front + "/v1/chat/completions", data=SLOW_BODY,
                                    headers=headers("chat", "sk-sim")) as resp:
                arrivals = [time.perf_counter() async for _ in resp.content.iter_any()]
    # The replay waits the 200 ms asked for before its head, then paces four gaps of 30 ms.
    assert arrivals[0] - sent >= 0.2
    assert arrivals[-1] - arrivals[0] >= 4 * 0.03 * 0.9


async def test_the_load_generator_sees_every_stream_and_its_gaps(front: str) -> None:
    spec = many_streams.Spec(front + "/v1/chat/completions", SLOW_BODY, headers("chat", "sk-sim"), 20,
                             time.time(), 10.0)
    seen = await many_streams.wave(spec)
    assert (seen.served, seen.errors) == (20, {})
    assert len(seen.first_chunk_ms) == 20 and min(seen.first_chunk_ms) >= 200
    # Five tokens 30 ms apart: four paced gaps per stream, of which a loaded machine (the suite runs
    # two workers per core) may deliver some in one read; at least half are seen as gaps.
    assert sum(1 for gap in seen.gaps_ms if gap >= 25) >= 20 * 2


async def test_a_failing_call_is_counted_as_an_error(front: str) -> None:
    spec = many_streams.Spec(front + "/v1/chat/completions", b"{", headers("chat", "sk-sim"), 3,
                             time.time(), 10.0)
    seen = await many_streams.wave(spec)
    assert seen.served == 0 and seen.errors == {"HTTP 400": 3}


_FETCH = """
import asyncio, sys, aiohttp
async def main():
    async with aiohttp.ClientSession() as s, s.get(sys.argv[1]) as r:
        print(r.status, await r.text())
asyncio.run(main())
"""


async def test_the_tls_front_is_trusted_through_ssl_cert_file_alone(simulator: SimulatorHandle,
                                                                    tmp_path: Path) -> None:
    authority = tls.make_authority(tmp_path)
    server, recorder = await replay.start(0, simulator.base_url, authority.server_context())
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/replay/stats"
    env = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
    try:
        trusted = await _fetch(url, {**env, **authority.client_env()})
        untrusted = await _fetch(url, env)
    finally:
        server.close()
        await server.wait_closed()
        await recorder.close()
    assert trusted[0] == 0 and trusted[1].startswith(b"200 "), trusted[2]
    assert untrusted[0] != 0 and b"CERTIFICATE_VERIFY_FAILED" in untrusted[2]


async def _fetch(url: str, env: dict[str, str]) -> tuple[int, bytes, bytes]:
    """A fresh process's aiohttp default client GETs ``url``: exit code, stdout, stderr."""
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _FETCH, url, env=env, stdout=pipe,
                                                stderr=pipe)
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    return await proc.wait(), out, err
