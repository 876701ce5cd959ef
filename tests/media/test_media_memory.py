"""A 200 MB video relayed through the gateway in constant memory (CONTRACT 6d): the simulator
makes the file as it sends it (``kb<N>``: nothing stored), the gateway relays it 64 KB at a time
under the client's back-pressure, and the client reads and checks it a piece at a time. Gateway,
simulator and client share this process, so the peak RSS growth measured bounds all three."""

from __future__ import annotations

import hashlib
import time

import pytest

from tests.conftest import GatewayHandle
from tests.families.media_helpers import poll
from tests.hostile.upstream import MIB, PeakRss
from translators.videos.simulator import file_bytes

SIZE_KB = 200 * 1024  # 200 MiB
RSS_BOUND = 40 * MIB  # the file is 5x this


async def test_a_200_mb_video_streams_in_constant_memory(mgw: GatewayHandle,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    reply = await mgw.request("POST", "/v1/videos", key=mgw.key,
                              json={"model": "videos-standard", "prompt": f"long sim:dur100 sim:kb{SIZE_KB}"})
    done = await poll(mgw, f"/v1/videos/{reply.json()['id']}", lambda v: v["status"] == "completed")
    task = await mgw.gateway.storage.get_task(done["id"])
    assert task is not None and task.result_json
    name = task.result_json.split("/v1/videos/files/", 1)[1].split(".mp4", 1)[0]  # the simulator's file
    size = SIZE_KB * 1024
    got, expected = hashlib.sha256(), hashlib.sha256()
    received = 0
    started = time.monotonic()
    with PeakRss() as rss:
        async with mgw.http.get(done["video_url"]) as resp:  # the signed link, no key
            assert resp.status == 200 and resp.content_length == size
            async for piece in resp.content.iter_chunked(1024 * 1024):
                got.update(piece)
                expected.update(file_bytes(name, received, received + len(piece)))
                received += len(piece)
    took = time.monotonic() - started
    assert received == size and got.digest() == expected.digest()
    with capsys.disabled():
        print(f"\n200 MiB relayed in {took:.1f} s; peak RSS growth {rss.growth_bytes / MIB:.1f} MiB")
    assert rss.growth_bytes < RSS_BOUND, f"peak RSS grew {rss.growth_bytes / MIB:.0f} MiB"
