"""Speech to text (spec 4.6) end to end with the official ``openai`` SDK: every response format,
translations, per-minute billing (balance, ledger audit, request log), failover, each bad field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
import pytest_asyncio

from tests.families.audio_helpers import (
    PER_SECOND_NANO,
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


# --- every response format ------------------------------------------------------------------------

async def test_json(audio: Audio) -> None:
    result = await audio.client.audio.transcriptions.create(model="whisper-sim", file=upload())
    assert isinstance(result, openai.types.audio.Transcription) and len(result.text.split()) >= 3


async def test_verbose_json_with_segments_and_words(audio: Audio) -> None:
    result = await audio.client.audio.transcriptions.create(
        model="whisper-sim", file=upload(), response_format="verbose_json",
        timestamp_granularities=["word", "segment"], language="en", temperature=0.2, prompt="Names: Zoë")
    assert result.duration == 3.0 and result.language == "en"
    assert result.segments and result.segments[0].start == 0.0
    assert result.segments[-1].end == pytest.approx(3.0)
    assert result.words and result.words[-1].end == pytest.approx(3.0)
    sent = (await audio.audio_calls_upstream())[-1]
    assert sent["headers"]["content-type"].startswith("multipart/form-data; boundary=gateway-")
    assert int(sent["headers"]["content-length"]) > len(WAV_3S)  # sized, not chunked


@pytest.mark.parametrize("fmt", ["text", "srt", "vtt"])
async def test_plain_text_formats(audio: Audio, fmt: Any) -> None:
    result = await audio.client.audio.transcriptions.create(model="whisper-sim", file=upload(),
                                                            response_format=fmt)
    assert isinstance(result, str) and result.strip()
    if fmt == "srt":
        assert result.startswith("1\n00:00:00,000 --> ")
    if fmt == "vtt":
        assert result.startswith("WEBVTT\n\n00:00:00.000 --> ")
    log = await audio.last_log()
    assert log.charge_nano == 3 * PER_SECOND_NANO  # text says no duration: the WAV header does


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # the SDK marks translations so
async def test_translation(audio: Audio) -> None:
    result = await audio.client.audio.translations.create(model="whisper-sim", file=upload(),
                                                          response_format="verbose_json")
    assert result.language == "english" and result.duration == 3.0  # type: ignore[union-attr]
    text = await audio.client.audio.translations.create(model="whisper-sim", file=upload(),
                                                        response_format="text")
    assert isinstance(text, str) and text.strip()
    log = await audio.last_log()
    assert log.route == "/v1/audio/translations" and log.family == "audio"


# --- per-minute billing ----------------------------------------------------------------------------

async def test_billing_settles_balance_ledger_and_log(audio: Audio) -> None:
    await audio.client.audio.transcriptions.create(model="whisper-sim", file=upload())
    log = await audio.last_log()
    assert (log.status, log.outcome, log.model, log.upstream) == (200, "success", "whisper-sim", "sim-audio")
    assert log.charge_nano == 3 * PER_SECOND_NANO
    assert await audio.balance() == START_NANO - 3 * PER_SECOND_NANO
    assert await audio.gw.gateway.storage.audit() == []
    assert await audio.gw.gateway.storage.open_reservations() == []


async def test_upstream_duration_wins_over_the_header(audio: Audio) -> None:
    await audio.client.audio.transcriptions.create(model="whisper-sim", file=upload(),
                                                   response_format="verbose_json", prompt="[[duration:42.2]]")
    assert (await audio.last_log()).charge_nano == 43 * PER_SECOND_NANO  # started seconds


async def test_header_duration_when_the_upstream_reports_none(audio: Audio) -> None:
    await audio.client.audio.transcriptions.create(model="whisper-nousage", file=upload(samples.wav(7.2)))
    assert (await audio.last_log()).charge_nano == 8 * PER_SECOND_NANO


@pytest.mark.parametrize(("name", "data", "seconds"), [
    ("a.mp3", samples.mp3_with_id3(1000), 27),  # 1000 frames of 1152 samples at 44.1 kHz = 26.1 s
    ("a.m4a", samples.mp4(12.5, mdat_bytes=25_000), 13),  # sizes at 16 kbit/s: above the reservation floor
    ("a.webm", samples.webm(61.0, cluster_bytes=122_000), 61),
    ("a.webm", samples.webm(None), 1),  # no duration anywhere: size / 4 kB/s, at least a second
])
async def test_duration_read_from_each_header(audio: Audio, name: str, data: bytes, seconds: int) -> None:
    await audio.client.audio.transcriptions.create(model="whisper-nousage", file=(name, data),
                                                   response_format="text")
    assert (await audio.last_log()).charge_nano == seconds * PER_SECOND_NANO


async def test_a_header_longer_than_the_size_allows_is_billed_at_the_reserved_bound(audio: Audio) -> None:
    """A 4 kB file whose header claims an hour: the hold was sized from the body (8 kbit/s floor),
    and no more than the hold is charged, so a forged header cannot bill a user an hour."""
    data = samples.mp4(3600.0, mdat_bytes=4000)
    await audio.client.audio.transcriptions.create(model="whisper-nousage", file=("a.m4a", data),
                                                   response_format="text")
    log = await audio.last_log()
    assert 0 < log.charge_nano < 10 * PER_SECOND_NANO


async def test_failed_upstream_costs_nothing(audio: Audio) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        await audio.client.audio.transcriptions.create(model="whisper-down", file=upload())
    assert info.value.status_code == 502
    log = await audio.last_log()
    assert log.charge_nano == 0 and log.outcome == "upstream_error"
    assert await audio.balance() == START_NANO
    assert await audio.gw.gateway.storage.open_reservations() == []


async def test_failover_sends_the_spooled_file_again(audio: Audio) -> None:
    await audio.clear_upstream_log()
    result = await audio.client.audio.transcriptions.create(model="whisper-failover", file=upload(),
                                                            response_format="verbose_json")
    assert result.duration == 3.0
    log = await audio.last_log()
    assert (log.upstream, log.attempts, log.charge_nano) == ("sim-audio-backup", 2, 3 * PER_SECOND_NANO)
    sent = await audio.audio_calls_upstream()
    assert len(sent) == 2 and sent[0]["headers"]["content-length"] == sent[1]["headers"]["content-length"]


async def test_an_upstream_4xx_is_relayed_and_costs_nothing(audio: Audio) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as info:
        await audio.client.audio.transcriptions.create(model="whisper-rejects", file=upload())
    assert "simulated failure" in str(info.value.message)
    log = await audio.last_log()
    assert (log.status, log.outcome, log.charge_nano) == (422, "client_error", 0)
    assert await audio.balance() == START_NANO


async def test_fields_after_the_file_are_read_and_checked(audio: Audio) -> None:
    form = aiohttp.FormData()
    form.add_field("file", WAV_3S, filename="a.wav", content_type="audio/wav")
    form.add_field("model", "whisper-sim")
    form.add_field("response_format", "text")
    reply = await audio.gw.request("POST", "/v1/audio/transcriptions", data=form, key=audio.key)
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain")
    assert (await audio.last_log()).charge_nano == 3 * PER_SECOND_NANO
    form = aiohttp.FormData()
    form.add_field("file", WAV_3S, filename="a.wav", content_type="audio/wav")
    form.add_field("model", "whisper-sim")
    form.add_field("language", "xx-bad")
    reply = await audio.gw.request("POST", "/v1/audio/transcriptions", data=form, key=audio.key)
    assert reply.status == 400 and reply.json()["error"]["param"] == "language"


# --- each bad field --------------------------------------------------------------------------------

BAD_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"file": ("notes.txt", b"hello", "text/plain")}, "file"),
    ({"file": ("fake.wav", b"%PDF-1.7\n" + b"x" * 100, "audio/wav")}, "file"),
    ({"file": ("empty.wav", b"", "audio/wav")}, "file"),
    ({"language": "english"}, "language"),
    ({"language": "zz"}, "language"),
    ({"response_format": "xml"}, "response_format"),
    ({"temperature": 1.5}, "temperature"),
    ({"temperature": -0.1}, "temperature"),
    ({"timestamp_granularities": ["word"]}, "timestamp_granularities[]"),
    ({"timestamp_granularities": ["word"], "response_format": "srt"}, "timestamp_granularities[]"),
    ({"timestamp_granularities": ["char"], "response_format": "verbose_json"}, "timestamp_granularities[]"),
    ({"model": ""}, "model"),
    ({"extra_body": {"color": "blue"}}, "color"),
]


async def test_each_bad_field_is_a_400_naming_it(audio: Audio) -> None:
    await audio.clear_upstream_log()
    for fields, param in BAD_FIELDS:  # one gateway for every case: starting one costs more
        args: dict[str, Any] = {"model": "whisper-sim", "file": upload(), **fields}
        with pytest.raises(openai.BadRequestError) as info:
            await audio.client.audio.transcriptions.create(**args)
        assert info.value.code == "invalid_request" and info.value.param == param, (fields, info.value.body)
    assert await audio.audio_calls_upstream() == []
    assert await audio.balance() == START_NANO


async def test_unknown_and_forbidden_models(audio: Audio) -> None:
    with pytest.raises(openai.NotFoundError):
        await audio.client.audio.transcriptions.create(model="no-such-model", file=upload())
    limited = await audio.gw.create_key(audio.user_id, name="chat-only", models=["sim-chat"])
    client = openai.AsyncOpenAI(base_url=audio.gw.base_url + "/v1", api_key=limited["key"], max_retries=0)
    with pytest.raises(openai.PermissionDeniedError) as info:
        await client.audio.transcriptions.create(model="whisper-sim", file=upload())
    assert info.value.code == "model_not_allowed"
    await client.close()


async def test_missing_key_and_not_multipart(audio: Audio) -> None:
    reply = await audio.gw.request("POST", "/v1/audio/transcriptions", data=b"x")
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    reply = await audio.gw.request("POST", "/v1/audio/transcriptions", json={"model": "whisper-sim"},
                                   key=audio.key)
    assert reply.status == 400 and reply.json()["error"]["code"] == "invalid_request"
    form = aiohttp.FormData(default_to_multipart=True)
    form.add_field("model", "whisper-sim")
    reply = await audio.gw.request("POST", "/v1/audio/transcriptions", data=form, key=audio.key)
    assert reply.status == 400 and reply.json()["error"]["param"] == "file"
