"""Newline-delimited JSON framing: complete lines out of bytes of any chunking.

Ollama streams one JSON object per line (``application/x-ndjson``); a network chunk may end in the
middle of a line, or hold many. A CR before the newline is tolerated; blank lines are skipped. An
unterminated line is held in the core's ``FrameBuffer`` (``gateway.api.wire``): joined once when
it ends, and at most ``limits.stream_element_bytes`` of it (past that ``FrameTooLarge``, which the
relay takes for a failed upstream).
"""

from __future__ import annotations

from gateway.api.wire import MAX_FRAME_BYTES, FrameBuffer

CONTENT_TYPE = "application/x-ndjson"


class LineSplitter:
    """``feed`` returns the lines completed by a chunk; ``close`` the unterminated rest, if any."""

    def __init__(self, max_line_bytes: int = MAX_FRAME_BYTES) -> None:
        self._held = FrameBuffer(max_line_bytes, "an NDJSON line")

    def feed(self, chunk: bytes) -> list[bytes]:
        end = chunk.rfind(b"\n")
        if end < 0:
            self._held.add(chunk)
            return []
        data = self._held.take(chunk[:end])
        self._held.add(chunk[end + 1:])
        return [line.rstrip(b"\r") for line in data.split(b"\n") if line.strip()]

    def close(self) -> list[bytes]:
        tail = self._held.take().strip()
        return [tail] if tail else []
