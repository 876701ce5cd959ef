"""``translators.v1beta.framing`` under its limits: an array element or an event never held past
them, and ``passed`` (what a fast-path relay forwards) always ends on a whole object."""

from __future__ import annotations

import orjson
import pytest

from gateway.wire.frames import FrameTooLarge
from translators.v1beta.framing import ArraySplitter, ObjectSplitter

OBJECTS = [{"candidates": [{"content": {"parts": [{"text": f"piece {i} " + "]}[{"}]}}]} for i in range(3)]
ARRAY = b"[" + b",\r\n".join(orjson.dumps(o) for o in OBJECTS) + b"]"
SSE = b"".join(b"data: " + orjson.dumps(o) + b"\r\n\r\n" for o in OBJECTS)


def two_cuts(data: bytes) -> list[list[bytes]]:
    return [[data[:i], data[i:j], data[j:]] for i in range(0, len(data) + 1, 7)
            for j in range(i, len(data) + 1, 11)]


@pytest.mark.parametrize("data", [ARRAY, b"  \r\n" + ARRAY, SSE], ids=["array", "blank-first", "sse"])
def test_passed_is_every_byte_in_whole_objects(data: bytes) -> None:
    for chunks in two_cuts(data):
        splitter = ObjectSplitter(relay=True)
        objects, sent = [], b""
        for chunk in chunks:
            objects += splitter.feed(chunk)
            sent += splitter.passed
            # What went out so far holds whole objects only: as many as were decoded.
            assert sent.count(b'"candidates"') == len(objects), (chunks, sent)
        objects += splitter.close()
        assert sent + splitter.passed == data, chunks
        assert [orjson.loads(o) for o in objects] == OBJECTS, chunks


def test_an_element_past_the_limit_is_refused_split_or_whole() -> None:
    element = b'{"text": "' + b"x" * 2000 + b'"}'
    split = ArraySplitter(max_element_bytes=1000)
    split.feed(b"[" + element[:900])
    with pytest.raises(FrameTooLarge):
        split.feed(element[900:1500])
    with pytest.raises(FrameTooLarge):  # it would end in this very chunk: too large all the same
        ArraySplitter(max_element_bytes=1000).feed(b"[" + element + b"]")
    fits = ArraySplitter(max_element_bytes=len(element))
    assert fits.feed(b"[" + element[:10]) == [] and fits.feed(element[10:] + b"]") == [element]


def test_an_element_that_never_closes_is_never_held_past_the_limit() -> None:
    splitter = ObjectSplitter(max_element_bytes=64 * 1024, relay=True)
    splitter.feed(b'[{"candidates": [{"content": {"parts": [{"text": "')
    with pytest.raises(FrameTooLarge, match="array element"):
        for _ in range(100):
            splitter.feed(b"a" * 4096)
            assert splitter.passed == b""  # nothing of the open element goes out


def test_blank_bytes_before_the_framing_are_bounded() -> None:
    splitter = ObjectSplitter(max_element_bytes=1000)
    with pytest.raises(FrameTooLarge):
        for _ in range(100):
            splitter.feed(b" \r\n" * 10)


def test_an_sse_event_past_the_limit_is_refused() -> None:
    splitter = ObjectSplitter(max_event_bytes=1000)
    assert splitter.feed(SSE[:40]) == []
    with pytest.raises(FrameTooLarge, match="stream event"):
        splitter.feed(b"data: " + b"y" * 2000)
