"""Server-sent events: the one incremental parser every family's upstream stream goes through.

``SSEParser`` follows the WHATWG event-stream rules on bytes of any chunking:

* lines end with CRLF, LF or a lone CR, and a CRLF split across two chunks is one line end;
* ``:`` starts a comment; ``field: value`` loses one leading space of its value; a line without a
  colon is a field with an empty value; unknown fields are ignored;
* an event is dispatched at a blank line, its ``data`` lines joined with ``\\n`` (an event without
  data is not dispatched); ``event`` names it, ``id`` sets the last event id, which persists;
* a UTF-8 BOM at the very start is dropped. Bytes are never decoded here: a payload with invalid
  UTF-8 reaches its family's JSON decoder as it came.

Two deliberate departures, both for upstreams as they are: ``close()`` dispatches an event whose
final blank line never came (a stream cut after a complete ``data:`` line still delivers it), and
``each_data_line=True`` dispatches every ``data:`` line at once, without waiting for the blank line
(OpenAI-style payloads are single-line JSON: it saves a chunk of latency and tolerates servers that
leave the blank lines out).

One event is held at most ``max_event_bytes`` (the running config's ``limits.sse_event_bytes``):
its data lines together, plus the unfinished line (a line alone counts too, whatever its field,
and so does each data line's joining newline, so that a flood of empty ``data:`` lines is no way
around it). Past it ``FrameTooLarge`` is raised rather than buffering without bound
(``gateway.wire.frames``). A line split over many chunks is joined once, when it ends (no
quadratic re-copying).

For a relay that forwards the upstream's bytes untouched (the fast path), ``EventBlocks`` cuts them
after their last complete event under the same limit, and ``complete_end``, ``split_events`` and
``event_data`` apply the same line rules to a block of bytes.
"""

from __future__ import annotations

import re
from typing import NoReturn

from gateway.wire.frames import MAX_FRAME_BYTES, FrameBuffer, FrameTooLarge

EVENT = "a stream event"  # the frame's name in ``FrameTooLarge``
_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"\r\n|\r|\n")
# A line end followed by an empty line: the end of an event. CRLF is one line end, so the CR of a
# CRLF never counts as a lone CR (the lookahead), and "x\r\ny" holds no blank line.
_EVENT_END = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))")


class SSEEvent:
    __slots__ = ("data", "event", "id")

    def __init__(self, data: bytes, event: bytes = b"", id: bytes | None = None) -> None:
        self.data = data
        self.event = event  # b"" when unnamed (a browser would call it "message")
        self.id = id  # the last event id seen so far, if any

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, SSEEvent)
                and (self.data, self.event, self.id) == (other.data, other.event, other.id))

    def __repr__(self) -> str:
        return f"SSEEvent(data={self.data!r}, event={self.event!r}, id={self.id!r})"


def _field(line: bytes) -> tuple[bytes, bytes]:
    """A non-empty, non-comment line as (field name, value)."""
    colon = line.find(b":")
    if colon < 0:
        return line, b""
    value = line[colon + 1:]
    return line[:colon], value[1:] if value[:1] == b" " else value


class SSEParser:
    """Feed bytes of any chunking, get the events completed so far (see module docstring)."""

    def __init__(self, *, each_data_line: bool = False, max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._each_line = each_data_line
        self._max_event = max_event_bytes
        self._pending = FrameBuffer(max_event_bytes, EVENT)  # pieces of the unfinished last line
        self._skip_lf = False  # the last chunk ended with CR: a leading LF now ends no new line
        self._started = False
        self._data: list[bytes] = []
        self._data_size = 0  # the data lines held, each with its joining newline
        self._event = b""
        self.last_id: bytes | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if not self._started:
            self._started = True
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\n" not in chunk and b"\r" not in chunk:
            self._hold(chunk)  # mid-line: keep the piece, join once the line ends
            return []
        chunk = self._pending.take(chunk)
        if b"\r" in chunk:
            lines = _LINE_END.split(chunk)
            self._skip_lf = chunk.endswith(b"\r")
        else:
            lines = chunk.split(b"\n")
        tail = lines.pop()
        out: list[SSEEvent] = []
        for line in lines:
            self._line(line, out)
        if tail:
            self._hold(tail)
        return out

    def feed_unless(self, chunk: bytes, names: tuple[bytes, ...]) -> list[SSEEvent]:
        """``feed``, except that a chunk of whole events none of which mentions any of ``names``
        is passed over unparsed when no event is in progress: for a relay that reads only a few
        kinds of event, the common chunk then costs a few substring searches. Skipping such a
        chunk leaves the parser exactly as feeding it would (bar ``last_id`` and ``retry_ms``)."""
        if (self._started and not len(self._pending) and not self._data and not self._event
                and not self._skip_lf and chunk and not any(name in chunk for name in names)
                and complete_end(chunk) == len(chunk)):
            self._skip_lf = chunk.endswith(b"\r")
            return []
        return self.feed(chunk)

    def close(self) -> list[SSEEvent]:
        """End of the bytes: the unfinished line counts, and so does an event left undispatched
        (unless that last line takes it over the limit: it is dropped, never raised, since the
        stream is over anyway)."""
        out: list[SSEEvent] = []
        try:
            if len(self._pending):
                self._line(self._pending.take(), out)
        except FrameTooLarge:
            return out
        self._line(b"", out)
        return out

    def _hold(self, piece: bytes) -> None:
        try:
            self._pending.add(piece, also=self._data_size)
        except FrameTooLarge:
            self._give_up()

    def _give_up(self) -> NoReturn:
        """The event in progress is over the limit: dropped (nothing of it stays held; a later
        ``close`` finds nothing to dispatch), and ``FrameTooLarge`` raised."""
        self._data, self._data_size, self._event = [], 0, b""
        self._pending.clear()
        raise FrameTooLarge(EVENT, self._max_event)

    def _line(self, line: bytes, out: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                out.append(SSEEvent(b"\n".join(self._data), self._event, self.last_id))
                self._data, self._data_size = [], 0
            self._event = b""
            return
        if line[0] == 0x3A:  # ":" comment (keep-alives)
            return
        name, value = _field(line)
        if name == b"data":
            if not self._each_line:
                self._data_size += len(value) + 1
                if self._data_size > self._max_event:
                    self._give_up()
                self._data.append(value)
            elif value:
                out.append(SSEEvent(value, self._event, self.last_id))
        elif name == b"event":
            self._event = value
        elif name == b"id":
            if b"\0" not in value:
                self.last_id = value
        elif name == b"retry" and value.isdigit():
            self.retry_ms = int(value)


# --- whole blocks, for relays that forward bytes untouched ----------------------------------------


def complete_end(data: bytes) -> int:
    """The index just past the last complete event of ``data`` (its closing blank line); 0 when
    no event in it is complete. A CR at the very end counts as a line end."""
    if b"\r" not in data:  # the common case, answered from the end
        at = data.rfind(b"\n\n")
        return at + 2 if at >= 0 else 0
    end = 0
    for match in _EVENT_END.finditer(data):
        end = match.end()
    return end


# The longest event end is two CRLFs: an end finishing in a new chunk begins at most this many bytes
# before it.
_END_REACH = 3


class EventBlocks:
    """An upstream's bytes cut after their last complete event, for a relay that forwards whole
    events byte for byte: ``feed`` returns what a chunk completed (with the unfinished bytes held
    from before it), holding the rest; ``close`` returns what is left. Only the new chunk (and the
    few held bytes an event end may begin in) is searched, and the held pieces are joined once,
    when their event ends. More than ``max_event_bytes`` held raises ``FrameTooLarge``."""

    __slots__ = ("_held",)

    def __init__(self, max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._held = FrameBuffer(max_event_bytes, EVENT)

    def feed(self, chunk: bytes) -> bytes:
        if not len(self._held):
            end = complete_end(chunk)
        else:
            # The held bytes hold no complete event, so an end found here finishes in ``chunk``.
            before = self._held.tail(_END_REACH)
            end = max(complete_end(before + chunk) - len(before), 0)
        if not end:
            self._held.add(chunk)
            return b""
        done = self._held.take(chunk[:end])
        self._held.add(chunk[end:])
        return done

    def close(self) -> bytes:
        return self._held.take()


def split_events(block: bytes) -> list[bytes]:
    """``block`` cut after each event's closing blank line: the pieces, joined, are ``block``."""
    pieces: list[bytes] = []
    start = 0
    if b"\r" not in block:  # the common case: the blank line is b"\n\n" alone (a relay runs this per chunk)
        # Slices, so that a block of one event comes back as the very same object (no copy).
        while (at := block.find(b"\n\n", start)) >= 0:
            pieces.append(block[start:at + 2])
            start = at + 2
        if start < len(block):
            pieces.append(block[start:])
        return pieces
    for match in _EVENT_END.finditer(block):
        pieces.append(block[start:match.end()])
        start = match.end()
    if start < len(block):
        pieces.append(block[start:])
    return pieces


def event_data(event: bytes) -> bytes | None:
    """The data of one event's bytes (its ``data`` lines joined with ``\\n``); None without any."""
    end = event.find(b"\n")
    if event[:6] == b"data: " and end == len(event) - 2 and event[-1:] == b"\n" and b"\r" not in event:
        return event[6:end]  # the usual event: one data line and its blank line
    data: list[bytes] = []
    for line in event.split(b"\n") if b"\r" not in event else _LINE_END.split(event):
        # The field is "data" exactly: "data:<value>" or a bare "data" line (an empty value).
        if line[:5] == b"data:":
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line == b"data":
            data.append(b"")
    if not data:
        return None
    return data[0] if len(data) == 1 else b"\n".join(data)
