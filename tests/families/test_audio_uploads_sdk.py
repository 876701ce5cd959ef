"""Speech-to-text uploads with the official ``openai`` SDK: the size limit while the body streams
(413 the SDK reads), chunked bodies, refusals before the file is read, a caller hanging up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
import pytest_asyncio

from tests.families.audio_helpers import (
    START_NANO,
    WAV_3S,
    Audio,
    start,
    upload,
)
from tests.translators.audio import audio_samples as samples


@pytest_asyncio.fixture
async def audio(gateway_server: Any, make_config: Any, simulator: Any) -> AsyncIterator[Audio]:
    setup = await start(gateway_server, make_config, simulator)
    yield setup
    await setup.client.close()


async def test_insufficient_quota_is_refused_before_the_file_is_read(
        gateway_server: Any, make_config: Any, simulator: Any) -> None:
    setup = await start(gateway_server, make_config, simulator, quota_usd=0.00001)
    await setup.clear_upstream_log()
    with pytest.raises(openai.PermissionDeniedError) as info:
        await setup.client.audio.transcriptions.create(model="whisper-sim", file=upload(samples.wav(30)))
    assert info.value.code == "insufficient_quota"
    assert await setup.audio_calls_upstream() == []
    await setup.client.close()


# --- the size limit --------------------------------------------------------------------------------

async def test_25_mb_limit_is_a_413_the_sdk_reads(audio: Audio) -> None:
    await audio.clear_upstream_log()
    too_big = b"RIFF" + b"\x00" * (25 * 1024 * 1024)
    with pytest.raises(openai.APIStatusError) as info:
        await audio.client.audio.transcriptions.create(model="whisper-sim", file=upload(too_big))
    assert info.value.status_code == 413 and info.value.code == "request_too_large"
    assert await audio.audio_calls_upstream() == []
    log = await audio.last_log()
    assert log.charge_nano == 0 and log.status == 413
    assert await audio.balance() == START_NANO
    # The connection was not left broken: the next call works.
    assert (await audio.client.audio.transcriptions.create(model="whisper-sim", file=upload())).text


async def test_body_far_over_the_limit_is_refused_from_its_length(
        gateway_server: Any, make_config: Any, simulator: Any) -> None:
    setup = await start(gateway_server, make_config, simulator, limits={"transcription_bytes": 50_000})
    for size in (50_001, 3 * 1024 * 1024):  # over the file limit; over the whole body's limit too
        with pytest.raises(openai.APIStatusError) as info:
            await setup.client.audio.transcriptions.create(model="whisper-sim", file=upload(b"\x00" * size))
        assert info.value.status_code == 413 and info.value.code == "request_too_large"
    served = await setup.client.audio.transcriptions.create(model="whisper-sim", file=upload(samples.wav(1)))
    assert served.text
    await setup.client.close()


async def test_caller_hanging_up_mid_upload_releases_the_hold(audio: Audio) -> None:
    await audio.clear_upstream_log()
    boundary = "hangup"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-sim\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            "\r\n").encode()
    port = int(audio.gw.base_url.rsplit(":", 1)[1])
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write((f"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: Bearer {audio.key}\r\n"
                  f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
                  f"Content-Length: {len(head) + 5_000_000}\r\n\r\n").encode() + head + WAV_3S[:100_000])
    await writer.drain()
    for _ in range(200):  # the hold is taken when the file part begins
        if await audio.gw.gateway.storage.open_reservations():
            break
        await asyncio.sleep(0.01)
    assert await audio.gw.gateway.storage.open_reservations()
    writer.close()
    await writer.wait_closed()
    for _ in range(300):
        logs = await audio.logs()
        if logs:
            break
        await asyncio.sleep(0.01)
    assert (logs[0].status, logs[0].error_code, logs[0].charge_nano) == (499, "client_disconnect", 0)
    assert await audio.gw.gateway.storage.open_reservations() == []
    assert await audio.balance() == START_NANO
    assert await audio.audio_calls_upstream() == []


def _multipart(model: str, filename: str, data: bytes, boundary: str = "chunky") -> bytes:
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\r\n"
            ).encode() + data + f"\r\n--{boundary}--\r\n".encode()


async def test_chunked_uploads_are_counted_as_they_stream(
        gateway_server: Any, make_config: Any, simulator: Any) -> None:
    setup = await start(gateway_server, make_config, simulator, limits={"transcription_bytes": 50_000})

    async def chunked(body: bytes) -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        for start_at in range(0, len(body), 16_384):
            yield body[start_at:start_at + 16_384]

    headers = {"Authorization": f"Bearer {setup.key}", "Content-Type": "multipart/form-data; boundary=chunky"}
    url = setup.gw.base_url + "/v1/audio/transcriptions"
    async with aiohttp.ClientSession() as http:
        small = _multipart("whisper-sim", "a.wav", samples.wav(1.0))
        async with http.post(url, data=chunked(small), headers=headers) as resp:
            assert resp.status == 200, await resp.text()
        for size in (60_000, 2 * 1024 * 1024):  # over the file limit; over the body limit as well
            big = _multipart("whisper-sim", "a.wav", b"RIFF" + b"\x00" * size)
            async with http.post(url, data=chunked(big), headers=headers) as resp:
                assert resp.status == 413
                assert (await resp.json())["error"]["code"] == "request_too_large"
    logs = await setup.logs()
    assert [log.status for log in logs] == [413, 413, 200] and logs[0].charge_nano == 0
    assert await setup.gw.gateway.storage.open_reservations() == []
    await setup.client.close()


async def test_a_refused_key_is_readable_by_the_sdk_whatever_the_upload(audio: Audio) -> None:
    bad = openai.AsyncOpenAI(base_url=audio.gw.base_url + "/v1", api_key="sk-wrong", max_retries=0)
    for _ in range(2):  # and the connection is usable again
        with pytest.raises(openai.AuthenticationError) as info:
            await bad.audio.transcriptions.create(model="whisper-sim", file=upload(samples.wav(150.0)))
        assert info.value.code == "invalid_api_key"
    await bad.close()
