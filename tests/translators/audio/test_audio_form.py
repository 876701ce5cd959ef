"""The transcription form's validation, and the multipart body relayed upstream."""

from __future__ import annotations

import asyncio
import tempfile

import pytest

from gateway.runtime.errors import InvalidRequest
from gateway.wire.multipart import MultipartReader, PartData, PartEnd, PartStart, boundary_of
from translators.audio.form import check_filename, check_format, parse_form
from translators.audio.upload import Upload
from translators.audio.upstream_form import build_upload_call


def test_defaults_and_every_field() -> None:
    form = parse_form([("model", "whisper-1")])
    assert (form.model, form.response_format) == ("whisper-1", "json")
    assert form.language is None and form.temperature is None
    form = parse_form([("model", "m"), ("language", "DE"), ("prompt", "Zoë, Ünal"), ("temperature", "0.25"),
                       ("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
                       ("timestamp_granularities[]", "segment"), ("stream", "false")])
    assert (form.language, form.prompt, form.temperature, form.granularities) == (
        "de", "Zoë, Ünal", 0.25, ["word", "segment"])
    assert parse_form([("model", "m"), ("language", "")]).language is None  # empty: auto-detect


@pytest.mark.parametrize(("pairs", "param"), [
    ([], "model"),
    ([("model", " ")], "model"),
    ([("model", "m"), ("model", "n")], "model"),
    ([("model", "m"), ("language", "eng")], "language"),
    ([("model", "m"), ("language", "qq")], "language"),
    ([("model", "m"), ("response_format", "mp3")], "response_format"),
    ([("model", "m"), ("temperature", "hot")], "temperature"),
    ([("model", "m"), ("temperature", "nan")], "temperature"),
    ([("model", "m"), ("temperature", "1.01")], "temperature"),
    ([("model", "m"), ("timestamp_granularities[]", "word")], "timestamp_granularities[]"),
    ([("model", "m"), ("response_format", "verbose_json"), ("timestamp_granularities[]", "line")],
     "timestamp_granularities[]"),
    ([("model", "m"), ("stream", "true")], "stream"),
    ([("model", "m"), ("prompt", "x" * 20_000)], "prompt"),
    ([("model", "m"), ("speaker", "a")], "speaker"),
])
def test_bad_fields(pairs: list[tuple[str, str]], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_form(pairs)
    assert info.value.param == param


def test_partial_check_before_the_file() -> None:
    # Fields before the file: a missing model may still come, granularities may meet their format later.
    assert parse_form([("timestamp_granularities[]", "word")], complete=False).model == ""
    with pytest.raises(InvalidRequest):
        parse_form([("model", "m"), ("language", "xx")], complete=False)
    with pytest.raises(InvalidRequest):
        parse_form([("response_format", "json"), ("timestamp_granularities[]", "word")], complete=False)


def test_files() -> None:
    for ok in ("a.wav", "A.MP3", "x.y.m4a", "a.mpga", "a.webm", "a.mp4", "a.mpeg", "noextension"):
        check_filename(ok)
    for bad in (None, "a.txt", "a.ogg", "a.wav.exe"):
        with pytest.raises(InvalidRequest) as info:
            check_filename(bad)
        assert info.value.param == "file"
    check_format("wav", 10)
    for fmt, size in ((None, 10), ("wav", 0)):
        with pytest.raises(InvalidRequest):
            check_format(fmt, size)


def test_upstream_fields_per_task() -> None:
    form = parse_form([("model", "pub"), ("language", "fr"), ("response_format", "verbose_json"),
                       ("timestamp_granularities[]", "word"), ("temperature", "0")])
    assert form.upstream_fields("transcriptions", "priv") == [
        ("model", "priv"), ("response_format", "verbose_json"), ("temperature", "0.0"), ("language", "fr"),
        ("timestamp_granularities[]", "word")]
    assert form.upstream_fields("translations", "priv") == [
        ("model", "priv"), ("response_format", "verbose_json"), ("temperature", "0.0")]


def _spooled(data: bytes, filename: str) -> Upload:
    upload = Upload(filename=filename, content_type="audio/wav", size=len(data))
    upload.spool = tempfile.SpooledTemporaryFile(max_size=16)  # small: the disk path is used
    upload.spool.write(data)
    return upload


async def _collect(body: object) -> bytes:
    out = bytearray()
    async for chunk in body:  # type: ignore[attr-defined]
        out += chunk
    return bytes(out)


async def test_upstream_body_round_trips_and_is_sized() -> None:
    data = bytes(range(256)) * 1000
    upload = _spooled(data, 'we"ird\r\nname.wav')
    call = build_upload_call("/v1/audio/transcriptions", [("model", "m"), ("prompt", "Zoë")], upload)
    first, second = await _collect(call.body), None
    second = await _collect(build_upload_call("/x", [("model", "m")], upload).body)  # a retry reads anew
    assert len(first) == int(call.headers["Content-Length"])
    reader = MultipartReader(boundary_of(call.headers["Content-Type"]))
    events = reader.feed(first)
    reader.close()
    starts = [e for e in events if isinstance(e, PartStart)]
    assert [s.name for s in starts] == ["model", "prompt", "file"]
    assert starts[-1].filename == "we%22ird%0D%0Aname.wav"
    file_bytes = b"".join(e.data for e in events[events.index(starts[-1]):] if isinstance(e, PartData))
    assert file_bytes == data and isinstance(events[-1], PartEnd)
    assert second.endswith(b"--\r\n") and data in second
    upload.close()
    await asyncio.sleep(0)
