"""Server-sent events as OpenAI-compatible upstreams write them, split from bytes of any chunking.

Each ``data:`` line is taken as one payload as soon as its line is complete, without waiting for
the blank line that ends the event: OpenAI-style payloads are single-line JSON (or ``[DONE]``),
so this costs nothing in correctness, saves a chunk of latency, and tolerates servers that leave
out the blank lines. ``event:``, ``id:``, ``retry:`` and comment lines carry nothing we need.
"""

from __future__ import annotations

import re

# ``data: [DONE]`` on a line of its own. JSON payloads cannot hold a raw newline, so a line that
# starts with it is the terminator and never model text.
DONE_LINE = re.compile(rb"(?m)^data: ?\[DONE\][ \t\r]*$")


class DataLines:
    """Feed bytes, get the complete ``data:`` payloads seen so far."""

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._tail + chunk if self._tail else chunk
        lines = data.split(b"\n")
        self._tail = lines.pop()  # the unfinished last line (b"" when the chunk ended a line)
        return [payload for line in lines if (payload := _payload(line)) is not None]

    def close(self) -> list[bytes]:
        tail, self._tail = self._tail, b""
        payload = _payload(tail) if tail else None
        return [payload] if payload is not None else []


def _payload(line: bytes) -> bytes | None:
    if not line.startswith(b"data:"):
        return None
    value = line[5:]
    if value.startswith(b" "):
        value = value[1:]
    value = value.rstrip(b"\r")
    return value if value else None
