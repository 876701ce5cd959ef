"""MPEG audio (MP3) frame headers walked as a file streams by: the duration, exactly.

A 25 MB file has 60,000 frames at 128 kbit/s and 350,000 at 8 kbit/s, so the walk is a tight loop:
each header's length and duration come from a table made once at import (keyed by the header's
second and third bytes), durations are summed as integer ticks of 1/14,112,000 s (the least common
multiple of every MPEG sample rate) rather than fractions, and only a partial header is carried
from one chunk to the next.

The first frame may be a Xing/Info or VBRI header that states the frame count: then that count is
the answer and the walk stops. Should the frames lose sync (junk, a trailing tag), or past
``MAX_FRAMES``, the rest of the file is estimated at the average rate of the frames counted so far.
"""

from __future__ import annotations

import struct
from fractions import Fraction

__all__ = ["Mp3Frames", "frame_info", "id3_skip"]

_BITRATES = {  # kbit/s by (MPEG-1?, layer), index 1..14
    (True, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (True, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (True, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (False, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (False, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (False, 3): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}
_SAMPLE_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}
TICKS_PER_SECOND = 14_112_000  # lcm of the nine sample rates: every frame is a whole number of ticks
# Frames walked at most (about 43 minutes at 26 ms a frame): past that, the rest of the file is
# estimated at the average rate so far, which bounds the CPU a hostile 8 kbit/s upload can cost.
MAX_FRAMES = 100_000
FIRST_FRAME_BYTES = 64  # enough of the first frame to find a Xing/Info (<= 48) or VBRI (<= 54) header


def frame_info(b1: int, b2: int) -> tuple[int, int, bool] | None:
    """(length in bytes, duration in ticks, MPEG-1?) of a frame whose header's second and third
    bytes are ``b1``, ``b2`` (the first being 0xFF); None for a reserved or free-format header."""
    if b1 & 0xE0 != 0xE0:
        return None
    version, layer_bits = (b1 >> 3) & 3, (b1 >> 1) & 3
    bitrate_index, rate_index = b2 >> 4, (b2 >> 2) & 3
    if version == 1 or layer_bits == 0 or bitrate_index in (0, 15) or rate_index == 3:
        return None
    layer = 4 - layer_bits
    mpeg1 = version == 3
    bitrate = _BITRATES[(mpeg1, layer)][bitrate_index - 1] * 1000
    rate = _SAMPLE_RATES[version][rate_index]
    padding = (b2 >> 1) & 1
    if layer == 1:
        samples, length = 384, (12 * bitrate // rate + padding) * 4
    else:
        samples = 576 if (layer == 3 and not mpeg1) else 1152
        length = samples // 8 * bitrate // rate + padding
    return length, samples * (TICKS_PER_SECOND // rate), mpeg1


_TABLE: dict[int, tuple[int, int]] = {}
for _b1 in range(0xE0, 0x100):
    for _b2 in range(256):
        _info = frame_info(_b1, _b2)
        if _info is not None:
            _TABLE[_b1 << 8 | _b2] = (_info[0], _info[1])


def id3_skip(head: bytes) -> int:
    """Bytes taken by an ID3v2 tag at the start of ``head`` (its first 10 bytes), else 0."""
    if head[:3] != b"ID3" or len(head) < 10:
        return 0
    size = (head[6] & 0x7F) << 21 | (head[7] & 0x7F) << 14 | (head[8] & 0x7F) << 7 | (head[9] & 0x7F)
    return 10 + size + (10 if head[5] & 0x10 else 0)


def _xing_frames(frame: bytes, mpeg1: bool) -> int | None:
    """The frame count of a Xing/Info header (after the side info) or a VBRI header (offset 36)."""
    mono = frame[3] >> 6 == 3
    at = 4 + ((17 if mono else 32) if mpeg1 else (9 if mono else 17))
    if frame[at:at + 4] in (b"Xing", b"Info") and len(frame) >= at + 12:
        flags = struct.unpack(">I", frame[at + 4:at + 8])[0]
        if flags & 1:
            frames: int = struct.unpack(">I", frame[at + 8:at + 12])[0]
            return frames if frames > 0 else None
    if frame[36:40] == b"VBRI" and len(frame) >= 54:
        vbri: int = struct.unpack(">I", frame[50:54])[0]
        return vbri if vbri > 0 else None
    return None


class Mp3Frames:
    """Feed the file's bytes in order from any offset at or before ``start`` (the first frame)."""

    def __init__(self, start: int) -> None:
        self._next = start  # absolute offset of the next frame header
        self._carry = b""  # a header (or the first frame's head) split over two chunks
        self._first = True
        self._done = False
        self.ticks = 0
        self.bytes = 0
        self.end = start  # where the counted frames end
        self.xing_ticks: int | None = None
        self.frames = 0
        self.estimate_rest = False  # sync lost, or MAX_FRAMES reached: the rest at the average rate

    def feed(self, chunk: bytes, offset: int) -> None:
        if self._done:
            return
        buf = self._carry + chunk if self._carry else chunk
        base = offset - len(self._carry)
        i, n = self._next - base, len(buf)
        if i < 0:  # cannot happen when fed in order; never walk backwards
            self._done = True
            return
        table, ticks, counted, frames, budget = _TABLE, 0, 0, 0, MAX_FRAMES - self.frames
        while i + 4 <= n:
            found = table.get(buf[i + 1] << 8 | buf[i + 2]) if buf[i] == 0xFF else None
            if found is None or frames >= budget:
                self.estimate_rest = not self._first
                self._done = True
                break
            if self._first:
                if i + FIRST_FRAME_BYTES > n:
                    break  # wait for the rest of the first frame's head
                self._first = False
                info = frame_info(buf[i + 1], buf[i + 2])
                xing = _xing_frames(buf[i:i + FIRST_FRAME_BYTES], bool(info and info[2]))
                if xing is not None:
                    self.xing_ticks = xing * found[1]
                    self._done = True
                    break
            ticks += found[1]
            counted += found[0]
            frames += 1
            i += found[0]
        self.frames += frames
        self.ticks += ticks
        self.bytes += counted
        self._next = self.end = base + i  # the end of the last frame counted (maybe still to come)
        self._carry = buf[i:] if i < n and not self._done else b""

    def finish(self) -> None:
        """The file ended: a first frame shorter than the Xing window is still a frame."""
        if self._first and not self._done and len(self._carry) >= 4:
            found = _TABLE.get(self._carry[1] << 8 | self._carry[2]) if self._carry[0] == 0xFF else None
            if found is not None:
                self.ticks, self.bytes, self._first = found[1], found[0], False
                self.end = self._next + found[0]

    def seconds(self, total_size: int) -> Fraction | None:
        if self.xing_ticks is not None:
            return Fraction(self.xing_ticks, TICKS_PER_SECOND)
        if self.bytes == 0:
            return None
        ticks = Fraction(self.ticks)
        rest = total_size - self.end
        if self.estimate_rest and rest > 0:
            ticks += Fraction(rest) * self.ticks / self.bytes
        return ticks / TICKS_PER_SECOND
