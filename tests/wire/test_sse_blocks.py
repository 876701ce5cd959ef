"""The block helpers of gateway.wire.sse (``split_events``, ``event_data``), which a fast-path relay
runs on every chunk, have a quick path for blocks without CR: it must agree with the general line
rules (the regular-expression reading below) on any bytes, CR or not."""

from __future__ import annotations

import random
import re

from gateway.wire.sse import event_data, split_events

_LINE_END = re.compile(rb"\r\n|\r|\n")
_EVENT_END = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))")


def reference_split(block: bytes) -> list[bytes]:
    pieces, start = [], 0
    for match in _EVENT_END.finditer(block):
        pieces.append(block[start:match.end()])
        start = match.end()
    if start < len(block):
        pieces.append(block[start:])
    return pieces


def reference_data(event: bytes) -> bytes | None:
    data = []
    for line in _LINE_END.split(event):
        if not line or line[:1] == b":":
            continue
        name, colon, value = line.partition(b":")
        if name == b"data":
            data.append(value[1:] if colon and value[:1] == b" " else value)
    return b"\n".join(data) if data else None


ALPHABET = [b"\n", b"\n", b"\r", b"data", b"data:", b"data: ", b":", b" ", b"x", b"event: e", b"datax: y",
            b'{"a": 1}', b"[DONE]", b"id: 1"]


def test_random_blocks_agree_with_the_line_rules() -> None:
    rng = random.Random(14)
    for _ in range(20_000):
        block = b"".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))
        assert split_events(block) == reference_split(block), block
        assert b"".join(split_events(block)) == block
        for event in split_events(block):
            assert event_data(event) == reference_data(event), event


def test_common_chunks() -> None:
    block = b'data: {"a":1}\n\ndata: [DONE]\n\n'
    assert split_events(block) == [b'data: {"a":1}\n\n', b"data: [DONE]\n\n"]
    assert [event_data(e) for e in split_events(block)] == [b'{"a":1}', b"[DONE]"]
    assert event_data(b"event: x\ndata: a\ndata:b\n\n") == b"a\nb"
    assert event_data(b": keep-alive\n\n") is None
    assert split_events(b"data: partial") == [b"data: partial"]
