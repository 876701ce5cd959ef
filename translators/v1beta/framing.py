"""The two stream framings of ``streamGenerateContent``, split into whole JSON objects.

* ``alt=sse``: server-sent events, ``data: {...}`` then a blank line (Gemini ends lines with CRLF),
  cut into whole events and parsed by the core's ``gateway.wire.sse``; one event is held at most
  ``limits.sse_event_bytes``.
* without it: one JSON array sent incrementally, ``[`` then objects separated by ``,\\r\\n`` then
  ``]``. The objects may be pretty-printed, so the splitter tracks nesting and strings instead of
  trusting the separator; one element is held at most ``limits.stream_element_bytes``.

Past a limit ``gateway.wire.frames.FrameTooLarge`` is raised (the relay fails the upstream).
``ObjectSplitter`` picks the framing from the first byte and accepts any chunking of either; for a
relay that forwards the upstream's bytes, ``passed`` is what of them ends on a whole object (an
unfinished one waits for its end, so that an error appended to a cut stream never lands inside it).
"""

from __future__ import annotations

import re

from gateway.api.wire import MAX_FRAME_BYTES, EventBlocks, FrameBuffer, SSEEvent, SSEParser

_SPECIAL = re.compile(rb'["\\{}\[\]]')
_QUOTE, _BACKSLASH, _OPEN_BRACE, _OPEN_BRACKET = ord('"'), ord("\\"), ord("{"), ord("[")


class SseSplitter:
    """The JSON objects of an ``alt=sse`` stream: each whole event's data, through the core's parser
    (``[DONE]`` and empty events, which some proxies add, are not objects). ``passed``: the bytes of
    the events the last chunk completed."""

    def __init__(self, max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._events = EventBlocks(max_event_bytes)
        self._parser = SSEParser(max_event_bytes=max_event_bytes)
        self.passed = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.passed = self._events.feed(chunk)
        return _objects(self._parser.feed(self.passed)) if self.passed else []

    def close(self) -> list[bytes]:
        """A last event not followed by a blank line still counts."""
        self.passed = self._events.close()
        return _objects(self._parser.feed(self.passed) + self._parser.close())


def _objects(events: list[SSEEvent]) -> list[bytes]:
    return [e.data for e in events if e.data.strip() not in (b"", b"[DONE]")]


ELEMENT = "a stream array element"  # the frame's name in ``FrameTooLarge``


class ArraySplitter:
    """Elements of a JSON array streamed in arbitrary pieces, each as soon as it is complete.
    ``open_from``: where in the last chunk the element still open at its end began (0 when before
    it), or the chunk's length when none is open."""

    def __init__(self, max_element_bytes: int = MAX_FRAME_BYTES) -> None:
        self._depth = 0
        self._in_string = False
        self._skip = 0  # index in the next chunk before which matches are escaped characters
        self._element = FrameBuffer(max_element_bytes, ELEMENT)
        self._capturing = False
        self.ended = False  # the closing ``]`` was seen
        self.open_from = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0 if self._capturing else -1
        for match in _SPECIAL.finditer(chunk):
            i = match.start()
            if i < self._skip:
                continue
            c = chunk[i]
            if self._in_string:
                if c == _BACKSLASH:
                    self._skip = i + 2
                elif c == _QUOTE:
                    self._in_string = False
                continue
            if c == _QUOTE:
                self._in_string = True
            elif c in (_OPEN_BRACE, _OPEN_BRACKET):
                self._depth += 1
                if self._depth == 2:
                    self._capturing, start = True, i
            else:
                self._depth -= 1
                if self._depth == 1 and self._capturing:
                    self._element.add(chunk[start:i + 1])  # over the limit even if it ends here
                    out.append(self._element.take())
                    self._capturing, start = False, -1
                elif self._depth <= 0:
                    self.ended = True
        if self._capturing:
            self._element.add(chunk[start:])
            self.open_from = start
        else:
            self.open_from = len(chunk)
        self._skip = max(self._skip - len(chunk), 0)
        return out

    def close(self) -> list[bytes]:
        return []


class ObjectSplitter:
    """Whichever framing the stream turns out to use (first non-blank byte ``[`` means array).
    ``relay``: keep ``passed`` up to date (a relay of the bytes); a decoder needs only the objects."""

    def __init__(self, *, max_event_bytes: int = MAX_FRAME_BYTES,
                 max_element_bytes: int = MAX_FRAME_BYTES, relay: bool = False) -> None:
        self._relay = relay
        self._max_event = max_event_bytes
        self._max_element = max_element_bytes
        self._inner: SseSplitter | ArraySplitter | None = None
        # Blank bytes before the first one that tells the framing (held as they came, bounded).
        self._leading = FrameBuffer(max_element_bytes, "blank bytes before a stream")
        # An array's bytes after its last whole element, for ``passed`` (its open element, mostly).
        self._open = FrameBuffer(max_element_bytes, ELEMENT)
        self.passed = b""  # what the last ``feed``/``close`` made relayable, in whole objects

    @property
    def is_array(self) -> bool:
        return isinstance(self._inner, ArraySplitter)

    @property
    def array_ended(self) -> bool:
        return isinstance(self._inner, ArraySplitter) and self._inner.ended

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._inner is None:
            if not chunk.strip():
                self._leading.add(chunk)
                self.passed = b""
                return []
            chunk = self._leading.take(chunk)
            self._inner = (ArraySplitter(self._max_element) if chunk.lstrip()[:1] == b"["
                           else SseSplitter(self._max_event))
        objects = self._inner.feed(chunk)
        if isinstance(self._inner, SseSplitter):
            self.passed = self._inner.passed
            return objects
        if self._relay:
            cut = self._inner.open_from
            self.passed = self._open.take(chunk[:cut]) if cut else b""
            self._open.add(chunk[cut:])
        return objects

    def close(self) -> list[bytes]:
        if isinstance(self._inner, SseSplitter):
            objects = self._inner.close()
            self.passed = self._inner.passed
            return objects
        self.passed = self._open.take() + self._leading.take()
        return self._inner.close() if self._inner is not None else []
