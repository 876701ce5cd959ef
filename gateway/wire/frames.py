"""One unfinished frame of an upstream stream, held under a size limit.

Every family's stream parser cuts an upstream's bytes into frames (an SSE event, an element of a
streamed JSON array, an NDJSON line) and must hold a frame's bytes until it ends. A frame that
never ends (a blank line that never comes, an array element that never closes) would be held
without bound, so each parser holds it in a ``FrameBuffer``: the pieces are kept as they came and
joined once, when the frame ends (no quadratic re-copying), and one byte past the limit raises
``FrameTooLarge``. The relay takes that for a failed upstream (``gateway.upstream.attempt``
``upstream_io``): the attempt fails before any output, the stream ends with the family's error
event after some.

The limits are the running config's ``limits.sse_event_bytes`` and ``limits.stream_element_bytes``,
which the relay hands to each parser it makes (``stream_decoder`` and ``fast_stream``).
"""

from __future__ import annotations

# The defaults of ``limits.sse_event_bytes`` and ``limits.stream_element_bytes``, for a parser made
# outside a call (tests, offline decoding).
MAX_FRAME_BYTES = 16 * 1024 * 1024


class FrameTooLarge(ValueError):
    """A frame of an upstream stream went past its size limit. A ValueError, like every other
    unreadable upstream stream."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} larger than {limit} bytes")
        self.limit = limit


class FrameBuffer:
    """The bytes of one unfinished frame: ``add`` the pieces, ``take`` them joined when it ends."""

    __slots__ = ("_pieces", "_size", "_what", "limit")

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self._what = what  # the frame's name in the error: "an upstream stream event", ...
        self._pieces: list[bytes] = []
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, piece: bytes, *, also: int = 0) -> None:
        """Hold ``piece`` too; ``also``: bytes of the same frame the caller holds elsewhere. Past the
        limit the frame is given up: what was held is dropped, then ``FrameTooLarge`` raised."""
        if not piece:
            return
        self._size += len(piece)
        if self._size + also > self.limit:
            self.clear()
            raise FrameTooLarge(self._what, self.limit)
        self._pieces.append(piece)

    def clear(self) -> None:
        self._pieces, self._size = [], 0

    def take(self, last: bytes = b"") -> bytes:
        """Everything held, followed by ``last`` (the frame's end), as one bytes; the buffer empties.
        With nothing held, ``last`` itself comes back (no copy)."""
        if not self._pieces:
            return last
        pieces = self._pieces
        if last:
            pieces.append(last)
        self._pieces, self._size = [], 0
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def tail(self, count: int) -> bytes:
        """The last ``count`` bytes held (fewer when less is held): for a frame end that may begin
        in the held bytes and finish in the next chunk."""
        return b"".join(self._pieces[-count:])[-count:]
