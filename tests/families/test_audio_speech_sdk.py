"""Text to speech end to end with the official ``openai`` SDK: the audio streamed back to a file,
billed per input character (``per_mchar``), bad fields refused, an upstream cut not charged."""

from __future__ import annotations

import asyncio
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import pytest_asyncio

from gateway.accounts.records import RequestLog

NANO_PER_CHAR = 15_000  # 15 USD per million characters
TEXT = "The quick brown fox jumps over the lazy dog, twice: once for each ear. ¡Olé!"


class Speech:
    def __init__(self, gw: Any, client: openai.AsyncOpenAI, user_id: int, key: str) -> None:
        self.gw, self.client, self.user_id, self.key = gw, client, user_id, key

    async def last_log(self) -> RequestLog:
        for _ in range(200):  # a stream's row is written when the response ends
            await self.gw.gateway.meter.flush()
            items = (await self.gw.gateway.storage.log_page(self.user_id, 1, 10)).items
            if items:
                return items[0]
            await asyncio.sleep(0.01)
        raise AssertionError("no request log")

    async def balance(self) -> int:
        await self.gw.gateway.meter.flush()
        user = await self.gw.gateway.storage.get_user(self.user_id)
        assert user is not None
        return int(user.balance_nano)


@pytest_asyncio.fixture
async def speech(gateway_server: Any, make_config: Any, simulator: Any) -> AsyncIterator[Speech]:
    config = make_config(
        extra_models=[{"id": "tts-sim", "price": {"per_mchar": 15}},
                      {"id": "tts-cut", "price": {"per_mchar": 15}}],
        extra_upstreams=[{"name": "sim-tts", "protocol": "chat", "base_url": simulator.base_url,
                          "api_key": "sk-sim", "models": ["tts-sim"]},
                         {"name": "sim-tts-cut", "protocol": "chat", "base_url": simulator.base_url,
                          "api_key": "sk-sim-cut2", "models": ["tts-cut"]}])
    handle = await gateway_server(config)
    user = await handle.create_user("u", quota_usd=100)
    key = (await handle.create_key(user["id"], name="k"))["key"]
    client = openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0)
    yield Speech(handle, client, user["id"], key)
    await client.close()


async def test_speech_streams_to_a_file_and_is_billed_per_character(speech: Speech, tmp_path: Path) -> None:
    target = tmp_path / "speech.wav"
    async with speech.client.audio.speech.with_streaming_response.create(
            model="tts-sim", voice="alloy", input=TEXT, response_format="wav", speed=1.5,
            instructions="Cheerful.") as response:
        assert response.headers["content-type"] == "audio/wav"
        assert response.headers.get("transfer-encoding") == "chunked"  # relayed as it came, not buffered
        await response.stream_to_file(target)
    with wave.open(str(target)) as audio:
        assert audio.getframerate() == 8000 and audio.getnframes() > 1000
    log = await speech.last_log()
    assert (log.status, log.outcome, log.family, log.model) == (200, "success", "audio", "tts-sim")
    assert log.charge_nano == len(TEXT) * NANO_PER_CHAR
    assert await speech.balance() == 100 * 10**9 - len(TEXT) * NANO_PER_CHAR
    assert await speech.gw.gateway.storage.audit() == []


async def test_speech_content_whole(speech: Speech) -> None:
    response = await speech.client.audio.speech.create(model="tts-sim", voice={"id": "voice_123"},
                                                      input="Hello there.", response_format="pcm")
    assert len(response.content) > 0 and len(response.content) % 2 == 0
    assert (await speech.last_log()).charge_nano == len("Hello there.") * NANO_PER_CHAR


BAD_SPEECH_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"input": ""}, "input"),
    ({"input": "x" * 4097}, "input"),
    ({"voice": ""}, "voice"),
    ({"speed": 4.5}, "speed"),
    ({"speed": 0.1}, "speed"),
    ({"response_format": "ogg"}, "response_format"),
    ({"extra_body": {"pitch": 3}}, "pitch"),
]


async def test_bad_speech_fields(speech: Speech) -> None:
    for fields, param in BAD_SPEECH_FIELDS:  # one gateway for every case: starting one costs more
        args: dict[str, Any] = {"model": "tts-sim", "voice": "alloy", "input": "Hi.", **fields}
        with pytest.raises(openai.BadRequestError) as info:
            await speech.client.audio.speech.create(**args)
        assert info.value.code == "invalid_request" and info.value.param == param, (fields, info.value.body)
    assert await speech.balance() == 100 * 10**9


async def test_upstream_cut_is_a_truncated_transfer_and_costs_nothing(speech: Speech) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(speech.gw.base_url + "/v1/audio/speech",
                             json={"model": "tts-cut", "voice": "alloy", "input": TEXT},
                             headers={"Authorization": f"Bearer {speech.key}"}) as resp:
            assert resp.status == 200
            with pytest.raises(aiohttp.ClientPayloadError):
                await resp.read()
    log = await speech.last_log()
    assert log.outcome == "upstream_cut" and log.charge_nano == 0
    assert await speech.balance() == 100 * 10**9
