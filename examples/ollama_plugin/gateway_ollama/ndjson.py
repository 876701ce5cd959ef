"""Newline-delimited JSON framing: complete lines out of bytes of any chunking.

Ollama streams one JSON object per line (``application/x-ndjson``); a network chunk may end in the
middle of a line, or hold many. A CR before the newline is tolerated; blank lines are skipped.
"""

from __future__ import annotations

CONTENT_TYPE = "application/x-ndjson"


class LineSplitter:
    """``feed`` returns the lines completed by a chunk; ``close`` the unterminated rest, if any."""

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        data = self._tail + chunk if self._tail else chunk
        end = data.rfind(b"\n")
        if end < 0:
            self._tail = data
            return []
        self._tail = data[end + 1:]
        return [line.rstrip(b"\r") for line in data[:end].split(b"\n") if line.strip()]

    def close(self) -> list[bytes]:
        tail, self._tail = self._tail.strip(), b""
        return [tail] if tail else []

    @property
    def pending(self) -> bytes:
        """Bytes of a line not yet terminated."""
        return self._tail
