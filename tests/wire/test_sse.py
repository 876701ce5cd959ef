"""``gateway.wire.sse``: the one event-stream parser, on split and hostile input."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from gateway.relay.canonical import ChatRequest, StreamStart
from gateway.wire.frames import FrameTooLarge
from gateway.wire.sse import EventBlocks, SSEEvent, SSEParser, complete_end, event_data, split_events
from translators.chat.fastpath import FastStream
from translators.chat.stream_decode import ChatStreamDecoder
from translators.messages.fastpath import FastStream as MessagesFastStream
from translators.messages.stream_decode import MessagesStreamDecoder
from translators.v1beta.stream_decode import GeminiStreamDecoder

STREAM = (b": keep-alive\n"
          b"event: message_start\n"
          b"id: 1\n"
          b'data: {"a":\n'
          b"data: 1}\n"
          b"\n"
          b"retry: 3000\n"
          b"data:no-space\n"
          b"unknown: field\n"
          b"data\n"
          b"\n"
          b"event: ping\n"
          b"\n"
          b"data:  two spaces\n"
          b"\n")
EXPECTED = [SSEEvent(b'{"a":\n1}', b"message_start", b"1"), SSEEvent(b"no-space\n", b"", b"1"),
            SSEEvent(b" two spaces", b"", b"1")]


def parse(chunks: list[bytes], **options: bool) -> list[SSEEvent]:
    parser = SSEParser(**options)
    events = [e for c in chunks for e in parser.feed(c)]
    return events + parser.close()


def every_split(data: bytes) -> list[list[bytes]]:
    """Each one-cut and two-cut split, plus byte by byte."""
    splits = [[data[:i], data[i:]] for i in range(len(data) + 1)]
    rng = random.Random(3)
    for _ in range(200):
        i, j = sorted(rng.sample(range(len(data) + 1), 2))
        splits.append([data[:i], data[i:j], data[j:]])
    splits.append([data[i:i + 1] for i in range(len(data))])
    return splits


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_any_line_end_any_chunking(newline: bytes) -> None:
    data = STREAM.replace(b"\n", newline)
    for chunks in every_split(data):
        assert parse(chunks) == EXPECTED, chunks


def test_mixed_line_ends_and_a_crlf_split_across_chunks() -> None:
    data = b"data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\r"
    expected = [SSEEvent(b"a\nb\nc"), SSEEvent(b"d")]
    for chunks in every_split(data):
        assert parse(chunks) == expected
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == [] and parser.feed(b"\n") == []  # one line end, not two
    assert parser.feed(b"\r\n") == [SSEEvent(b"x")]


def test_retry_and_last_id_persist() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 1500\nid: 7\ndata: a\n\ndata: b\n\nid: bad\0id\ndata: c\n\n")
    assert parser.retry_ms == 1500 and parser.last_id == b"7"


def test_bom_only_at_the_start() -> None:
    assert parse([b"\xef\xbb\xbfdata: a\n\n"]) == [SSEEvent(b"a")]
    assert parse([b"data: \xef\xbb\xbfa\n\n"]) == [SSEEvent(b"\xef\xbb\xbfa")]


def test_invalid_utf8_passes_through_as_bytes() -> None:
    assert parse([b"data: \xff\xfe{\x80}\n\n"]) == [SSEEvent(b"\xff\xfe{\x80}")]


def test_close_delivers_an_unterminated_event() -> None:
    assert parse([b"data: last"]) == [SSEEvent(b"last")]
    assert parse([b"data: last\n"]) == [SSEEvent(b"last")]
    assert parse([b"event: x\n"]) == []  # no data: nothing to dispatch
    assert parse([b""]) == []


def test_each_data_line_mode() -> None:
    data = b"data: {\"a\":1}\ndata: [DONE]\n: ping\ndata:\n\ndata: z"
    for chunks in every_split(data):
        got = parse(chunks, each_data_line=True)
        assert [e.data for e in got] == [b'{"a":1}', b"[DONE]", b"z"]


def test_events_come_out_as_soon_as_they_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: 1\n\ndata: 2\n") == [SSEEvent(b"1")]
    assert parser.feed(b"\n") == [SSEEvent(b"2")]
    eager = SSEParser(each_data_line=True)
    assert eager.feed(b"data: 1\ndata: 2") == [SSEEvent(b"1")]


def test_huge_line_in_many_pieces() -> None:
    payload = b"x" * (4 * 1024 * 1024)
    data = b"data: " + payload + b"\n\n"
    parser = SSEParser()
    events = [e for i in range(0, len(data), 1000) for e in parser.feed(data[i:i + 1000])]
    assert events == [SSEEvent(payload)]


def test_a_line_past_the_limit_is_refused() -> None:
    parser = SSEParser(max_event_bytes=1000)
    parser.feed(b"data: " + b"x" * 900)
    with pytest.raises(FrameTooLarge):
        parser.feed(b"y" * 200)
    assert parser.close() == []  # the refused event is gone, nothing of it held
    with pytest.raises(FrameTooLarge):
        SSEParser(max_event_bytes=10).feed(b"data: a\n" + b"z" * 20)
    with pytest.raises(FrameTooLarge):  # a comment line is held while unfinished too
        SSEParser(max_event_bytes=10).feed(b": " + b"z" * 20)
    assert isinstance(FrameTooLarge("x", 1), ValueError)  # the relay's "unreadable stream" catches it


@pytest.mark.parametrize("line", [b"data: " + b"x" * 99 + b"\n", b"data:\n", b"data\r\n"])
def test_an_event_of_many_lines_past_the_limit_is_refused(line: bytes) -> None:
    """Each line is short: the event's lines together go past the limit (empty data lines too, by
    their joining newlines), and the parser holds no more than the limit on the way."""
    parser = SSEParser(max_event_bytes=10_000)
    with pytest.raises(FrameTooLarge):
        for _ in range(20_000):
            parser.feed(line)
    assert parser.close() == []
    parser.feed(b"data: next\n\n")  # a parser that refused an event is only ever closed, but stays sane


def test_an_event_just_under_the_limit_passes_and_the_limit_is_per_event() -> None:
    parser = SSEParser(max_event_bytes=1000)
    payload = b"x" * 998  # plus its joining newline: 999
    events = [e for _ in range(50) for e in parser.feed(b"data: " + payload + b"\n\n")]
    assert events == [SSEEvent(payload)] * 50
    eager = SSEParser(each_data_line=True, max_event_bytes=1000)  # one line is the event
    assert [e.data for e in eager.feed(b"data: " + b"y" * 990 + b"\n" * 3)] == [b"y" * 990]


def test_refused_event_bytes_are_not_held() -> None:
    """Pieces of a refused event are dropped at once: memory is the limit, not what was sent."""
    tracemalloc.start()
    try:
        parser = SSEParser(max_event_bytes=1 << 20)
        parser.feed(b"data: ")
        with pytest.raises(FrameTooLarge):
            for i in range(40):
                parser.feed(bytes([65 + i % 26]) * 65536)  # made here: traced, if it stays held
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 64 * 1024


def blocks(chunks: list[bytes], limit: int = 1 << 20) -> list[bytes]:
    cutter = EventBlocks(limit)
    return [*(cutter.feed(c) for c in chunks), cutter.close()]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_event_blocks_cut_after_whole_events_in_any_chunking(newline: bytes) -> None:
    data = STREAM.replace(b"\n", newline)
    for chunks in every_split(data):
        out = blocks(chunks)
        assert b"".join(out) == data, chunks
        for block in out[:-1]:  # what ``feed`` gives is whole events (or nothing)
            assert not block or complete_end(block) == len(block), (chunks, block)


def test_event_blocks_hold_at_most_the_limit() -> None:
    cutter = EventBlocks(1000)
    assert cutter.feed(b"data: 1\n\ndata: ") == b"data: 1\n\n"
    with pytest.raises(FrameTooLarge):
        for _ in range(100):
            cutter.feed(b"x" * 100)
    assert cutter.close() == b""


def test_random_garbage_never_raises_anything_else() -> None:
    rng = random.Random(9)
    alphabet = [b"data:", b" ", b"\r", b"\n", b":", b"x", b"\xff", b"event:", b"id:", b"\0", b"retry:9"]
    for _ in range(500):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        whole = parse([data])
        for chunks in (every_split(data)[:: max(1, len(data) // 3)] if data else [[data]]):
            assert parse(chunks) == whole


# --- blocks, for the fast path --------------------------------------------------------------------


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_block_helpers_agree_with_the_parser(newline: bytes) -> None:
    data = STREAM.replace(b"\n", newline)
    pieces = split_events(data)
    assert b"".join(pieces) == data
    assert [d for p in pieces if (d := event_data(p)) is not None] == [e.data for e in EXPECTED]
    assert complete_end(data) == len(data)
    cut = data[: data.index(b"data:  two")]
    assert complete_end(cut) == len(cut)
    assert complete_end(cut + b"data:  tw") == len(cut)


def test_block_helpers_do_not_mistake_a_crlf_for_a_blank_line() -> None:
    assert complete_end(b"data: a\r\ndata: b\r\n") == 0
    assert split_events(b"data: a\r\ndata: b\r\n") == [b"data: a\r\ndata: b\r\n"]
    assert complete_end(b"data: a\n\ndata: b\n") == 9
    assert event_data(b": only a comment\n\n") is None
    assert event_data(b"data:[DONE]\r\n\r\n") == b"[DONE]"


# --- every family's upstream stream goes through it ---------------------------------------------

SAMPLES = Path(__file__).parents[1] / "translators"
REQUEST = ChatRequest(model="m", messages=[])


def decoded(decoder: Any, chunks: list[bytes]) -> tuple[list[object], bool]:
    events = [e for c in chunks for e in decoder.feed(c)] + decoder.close()
    for event in events:
        if isinstance(event, StreamStart):
            event.created = 0  # the clock, not the bytes
    return events, decoder.complete


@pytest.mark.parametrize(("family", "sample"), [
    ("chat", "chat/samples/chat_stream_tools.sse"),
    ("messages", "messages/samples/stream_full.sse"),
    ("v1beta", "v1beta/samples/stream_thinking.sse"),
])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_family_decoders_read_any_line_end_in_any_chunking(family: str, sample: str, newline: bytes) -> None:
    data = (SAMPLES / sample).read_bytes().replace(b"\r\n", b"\n").replace(b"\n", newline)
    make = {"chat": lambda: ChatStreamDecoder(REQUEST), "messages": MessagesStreamDecoder,
            "v1beta": lambda: GeminiStreamDecoder(REQUEST)}[family]
    whole, complete = decoded(make(), [data])
    assert complete and whole
    rng = random.Random(len(data))
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(data)), 6))
        chunks = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert decoded(make(), chunks) == (whole, True)


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_chat_fast_path_relays_any_line_end_byte_for_byte(newline: bytes) -> None:
    data = (SAMPLES / "chat/samples/chat_stream_text_usage.sse").read_bytes().replace(b"\n", newline)
    for size in (1, 7, 64, len(data)):
        stream = FastStream(strip_usage=False)
        out = b"".join(stream.feed(data[i:i + size]) for i in range(0, len(data), size)) + stream.close()
        assert out == data and stream.complete and stream.usage is not None
        stripped = FastStream(strip_usage=True)
        out = b"".join(stripped.feed(data[i:i + size]) for i in range(0, len(data), size)) + stripped.close()
        assert b'"choices":[]' not in out and stripped.usage == stream.usage and stripped.complete


def test_chat_fast_path_done_must_be_a_data_line_of_its_own() -> None:
    text = b'data: {"choices":[{"index":0,"delta":{"content":"say data: [DONE]"}}]}\r\r'
    stream = FastStream(strip_usage=False)
    stream.feed(text)
    assert not stream.complete
    stream.feed(b"data:[DONE]\r\r")
    assert stream.complete


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_messages_fast_path_any_line_end(newline: bytes) -> None:
    data = (SAMPLES / "messages/samples/stream_full.sse").read_bytes().replace(b"\n", newline)
    for size in (1, 5, 40, len(data)):
        stream = MessagesFastStream("public")
        out = b"".join(stream.feed(data[i:i + size]) for i in range(0, len(data), size)) + stream.close()
        first = next(e for e in split_events(out) if event_data(e) is not None)
        assert b'"model":"public"' in first  # restored, whatever the line ends
        rest = out[len(first):]
        assert rest == data[len(data) - len(rest):]  # everything after message_start untouched
        assert stream.complete and stream.usage is not None and stream.usage.output_tokens == 89


def test_feed_unless_passes_over_uninteresting_whole_events_only() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: 1\n\n") == [SSEEvent(b"1")]
    assert parser.feed_unless(b"data: 2\n\n", (b"stop",)) == []  # skipped unparsed
    assert parser.feed_unless(b"data: stop\n\n", (b"stop",)) == [SSEEvent(b"stop")]
    assert parser.feed_unless(b"data: sto", (b"stop",)) == []  # unfinished: parsed, held
    assert parser.feed_unless(b"p\n\n", (b"stop",)) == [SSEEvent(b"stop")]
    assert parser.feed_unless(b"data: a\r", (b"stop",)) == []
    assert parser.feed_unless(b"\n\r\n", (b"stop",)) == [SSEEvent(b"a")]  # the CRLF split stays one
