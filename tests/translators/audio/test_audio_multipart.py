"""The incremental multipart reader: any chunking gives the same parts; hostile bodies are 400s."""

from __future__ import annotations

import pytest

from gateway.runtime.errors import InvalidRequest
from gateway.wire.multipart import MultipartReader, PartData, PartEnd, PartEvent, PartStart, boundary_of

BOUNDARY = b"----gw7MA4YWxkTrZu0gW"
FILE_BYTES = b"RIFF\r\n--" + BOUNDARY[:-1] + b"\r\n\r\n\x00\xff" * 50  # a near-boundary inside the data


def form(*parts: tuple[str, bytes, str | None]) -> bytes:
    out = b""
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += b"--" + BOUNDARY + b"\r\nContent-Disposition: " + disposition.encode()
        if filename:
            out += b"\r\nContent-Type: audio/wav"
        out += b"\r\n\r\n" + value + b"\r\n"
    return out + b"--" + BOUNDARY + b"--\r\n"


def parse(body: bytes, step: int) -> list[PartEvent]:
    reader = MultipartReader(BOUNDARY)
    events: list[PartEvent] = []
    for i in range(0, len(body), step):
        events += reader.feed(body[i:i + step])
    reader.close()
    merged: list[PartEvent] = []
    for event in events:
        last = merged[-1] if merged else None
        if isinstance(event, PartData) and isinstance(last, PartData):
            merged[-1] = PartData(last.data + event.data)
        else:
            merged.append(event)
    return merged


BODY = form(("model", b"whisper-1", None), ("file", FILE_BYTES, "a.wav"), ("language", b"en", None))
EXPECTED = [PartStart("model", None, None), PartData(b"whisper-1"), PartEnd(),
            PartStart("file", "a.wav", "audio/wav"), PartData(FILE_BYTES), PartEnd(),
            PartStart("language", None, None), PartData(b"en"), PartEnd()]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64, 1000, len(BODY)])
def test_any_chunking_gives_the_same_parts(step: int) -> None:
    assert parse(BODY, step) == EXPECTED


def test_data_is_streamed_not_held_until_the_part_ends() -> None:
    reader = MultipartReader(BOUNDARY)
    head = form(("file", b"x" * 10_000, "a.wav"))[:5000]
    events = reader.feed(head)
    assert any(isinstance(e, PartData) for e in events) and not any(isinstance(e, PartEnd) for e in events)


def test_boundary_of() -> None:
    assert boundary_of(f"multipart/form-data; boundary={BOUNDARY.decode()}") == BOUNDARY
    assert boundary_of('Multipart/Form-Data; boundary="abc"') == b"abc"
    too_long = "multipart/form-data; boundary=" + "a" * 71
    for bad in (None, "", "application/json", "multipart/form-data", too_long):
        with pytest.raises(InvalidRequest):
            boundary_of(bad)


END = b"\r\n\r\nx\r\n--" + BOUNDARY + b"--\r\n"


@pytest.mark.parametrize("body", [
    b"not multipart at all",
    b"--" + BOUNDARY + b"\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue",  # no closing boundary
    b"--" + BOUNDARY + b"\r\nContent-Type: text/plain" + END,  # no disposition
    b"--" + BOUNDARY + b"\r\nContent-Disposition: form-data" + END,  # no name
    b"--" + BOUNDARY + b"\r\nContent-Disposition: attachment; name=\"a\"" + END,
    b"--" + BOUNDARY + b"\r\nX-Long: " + b"h" * 10_000 + END,
    b"--" + BOUNDARY + b"\r\n" + b"X-A: 1\r\n" * 50 + b"Content-Disposition: form-data; name=\"a\"" + END,
    b"",
])
@pytest.mark.parametrize("step", [1, 5, 100_000])
def test_hostile_bodies_are_invalid_requests(body: bytes, step: int) -> None:
    with pytest.raises(InvalidRequest):
        parse(body, step)


def test_too_many_parts() -> None:
    body = form(*[(f"f{i}", b"v", None) for i in range(10)])
    reader = MultipartReader(BOUNDARY, max_parts=5)
    with pytest.raises(InvalidRequest, match="more than 5 parts"):
        reader.feed(body)


def test_epilogue_after_closing_boundary_is_ignored() -> None:
    assert parse(BODY + b"trailing junk", 4) == EXPECTED


@pytest.mark.parametrize("step", [1, 4, 1000])
@pytest.mark.parametrize("preamble", [b"\r\n", b"This is a multipart message.\r\n", b"x" * 4000 + b"\r\n"])
def test_a_preamble_before_the_first_boundary_is_skipped(step: int, preamble: bytes) -> None:
    assert parse(preamble + BODY, step) == EXPECTED


def test_a_body_that_never_reaches_its_boundary_is_refused_early() -> None:
    reader = MultipartReader(BOUNDARY)
    with pytest.raises(InvalidRequest, match="does not start with its boundary"):
        for _ in range(100):
            reader.feed(b"z" * 1000)
