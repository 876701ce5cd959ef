"""The two stream framings of ``streamGenerateContent``, split into whole JSON objects.

* ``alt=sse``: server-sent events, ``data: {...}`` then a blank line (Gemini ends lines with CRLF),
  parsed by the core's ``gateway.wire.sse``.
* without it: one JSON array sent incrementally, ``[`` then objects separated by ``,\\r\\n`` then
  ``]``. The objects may be pretty-printed, so the splitter tracks nesting and strings instead of
  trusting the separator.

``ObjectSplitter`` picks the framing from the first byte and accepts any chunking of either.
"""

from __future__ import annotations

import re

from gateway.wire.sse import SSEEvent, SSEParser

_SPECIAL = re.compile(rb'["\\{}\[\]]')
_QUOTE, _BACKSLASH, _OPEN_BRACE, _OPEN_BRACKET = ord('"'), ord("\\"), ord("{"), ord("[")


class SseSplitter:
    """The JSON objects of an ``alt=sse`` stream: each event's data, through the core's parser
    (``[DONE]`` and empty events, which some proxies add, are not objects)."""

    def __init__(self) -> None:
        self._parser = SSEParser()

    def feed(self, chunk: bytes) -> list[bytes]:
        return _objects(self._parser.feed(chunk))

    def close(self) -> list[bytes]:
        """A last event not followed by a blank line still counts."""
        return _objects(self._parser.close())


def _objects(events: list[SSEEvent]) -> list[bytes]:
    return [e.data for e in events if e.data.strip() not in (b"", b"[DONE]")]


class ArraySplitter:
    """Elements of a JSON array streamed in arbitrary pieces, each as soon as it is complete."""

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._skip = 0  # index in the next chunk before which matches are escaped characters
        self._element = bytearray()
        self._capturing = False
        self.ended = False  # the closing ``]`` was seen

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
                    self._element += chunk[start:i + 1]
                    out.append(bytes(self._element))
                    self._element.clear()
                    self._capturing, start = False, -1
                elif self._depth <= 0:
                    self.ended = True
        if self._capturing:
            self._element += chunk[start:]
        self._skip = max(self._skip - len(chunk), 0)
        return out

    def close(self) -> list[bytes]:
        return []


class ObjectSplitter:
    """Whichever framing the stream turns out to use (first non-blank byte ``[`` means array)."""

    def __init__(self) -> None:
        self._inner: SseSplitter | ArraySplitter | None = None
        self._pending = b""

    @property
    def is_array(self) -> bool:
        return isinstance(self._inner, ArraySplitter)

    @property
    def array_ended(self) -> bool:
        return isinstance(self._inner, ArraySplitter) and self._inner.ended

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._inner is None:
            self._pending += chunk
            head = self._pending.lstrip()
            if not head:
                return []
            self._inner = ArraySplitter() if head[:1] == b"[" else SseSplitter()
            chunk, self._pending = self._pending, b""
        return self._inner.feed(chunk)

    def close(self) -> list[bytes]:
        return self._inner.close() if self._inner is not None else []
