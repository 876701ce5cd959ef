"""The upload is never held whole in memory: a 20 MB file streams from the client, through the
gateway (multipart reader, spool, probe) and on to an upstream that counts it as it arrives, while
Python's allocations stay far below the file's size."""

from __future__ import annotations

import hashlib
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from tests.translators.audio import audio_samples as samples

FILE_BYTES = 20 * 1024 * 1024
CHUNK = 64 * 1024


async def _counting_upstream() -> tuple[web.AppRunner, str, dict[str, Any]]:
    """An OpenAI-wire audio upstream that reads the multipart body as a stream, keeping nothing."""
    seen: dict[str, Any] = {}

    async def transcriptions(request: web.Request) -> web.Response:
        digest, size = hashlib.sha256(), 0
        while chunk := await request.content.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
        seen.update(size=size, sha=digest.hexdigest(), content_length=request.headers.get("Content-Length"))
        return web.Response(body=orjson.dumps({"text": "ok", "usage": {"type": "duration", "seconds": 655}}),
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}", seen


async def test_a_20_mb_upload_streams_through_without_being_held(
        gateway_server: Any, make_config: Any) -> None:
    runner, url, seen = await _counting_upstream()
    gw = await gateway_server(make_config(
        extra_models=[{"id": "whisper-stream", "price": {"per_minute": 0.006}}],
        extra_upstreams=[{"name": "counting", "protocol": "chat", "base_url": url, "api_key": "k",
                          "models": ["whisper-stream"]}]))
    user = await gw.create_user("u", quota_usd=100)
    key = (await gw.create_key(user["id"], name="k"))["key"]
    boundary = "streamtest"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-stream\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.wav\"\r\n"
            "Content-Type: audio/wav\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    wav_head = samples.wav(0.0)[:44]  # a header whose data chunk we stream after it
    wav_head = wav_head[:40] + (FILE_BYTES - 44).to_bytes(4, "little")
    block = b"\x01\x02" * (CHUNK // 2)

    async def body() -> AsyncIterator[bytes]:
        yield head + wav_head
        for _ in range((FILE_BYTES - 44) // CHUNK):
            yield block
        yield block[: (FILE_BYTES - 44) % CHUNK] + tail

    tracemalloc.start()
    try:
        async with aiohttp.ClientSession() as http, http.post(
                gw.base_url + "/v1/audio/transcriptions", data=body(),
                headers={"Authorization": f"Bearer {key}",
                         "Content-Type": f"multipart/form-data; boundary={boundary}"}) as resp:
            assert resp.status == 200, await resp.text()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await runner.cleanup()
    assert peak < FILE_BYTES // 4, f"peak Python allocations {peak} bytes for a {FILE_BYTES}-byte upload"
    assert seen["size"] == int(seen["content_length"]) > FILE_BYTES
    await gw.gateway.meter.flush()
    logs = (await gw.gateway.storage.log_page(user["id"], 1, 10)).items
    assert logs[0].charge_nano == 655 * 100_000  # the upstream's duration, per started second
