"""The container format and duration of an audio upload, read from its bytes as they stream by.

Per-minute billing must never fall to $0 when an upstream does not report a duration, and the file
must never be held whole in memory, so ``AudioProbe`` is fed the upload chunk by chunk and keeps
only a few small buffers:

* the format from the magic bytes (``sniff``): wav, mp3 (ID3 tag or MPEG audio frame sync), mp4
  (``ftyp``: also m4a), webm (EBML), mpeg (MPEG program/video stream);
* WAV: exact, the ``data`` chunk's size over the ``fmt `` chunk's byte rate;
* MP3: the Xing/Info or VBRI header's frame count, else every frame header walked and counted
  (exact for CBR and VBR alike; see ``gateway.wire.mp3_frames``);
* MP4/M4A: the ``mvhd`` box's duration over its timescale (found wherever ``moov`` sits);
* WebM: the Segment Info's ``Duration`` times its ``TimecodeScale`` (files written by a live
  recorder may have none);
* anything else, or a header that says nothing: no duration; the caller bills
  ``fallback_seconds`` (see there).

Every parser works on absolute offsets through ``_Walker`` (collect N bytes at offset X, whatever
the chunking), so a header split over two chunks reads the same as a whole one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from fractions import Fraction

from gateway.wire.mp3_frames import Mp3Frames, frame_info, id3_skip

__all__ = ["FALLBACK_BYTES_PER_SECOND", "FLOOR_BYTES_PER_SECOND", "AudioProbe", "fallback_seconds",
           "sniff", "upper_bound_seconds"]

# The lowest bit rate an accepted file plausibly has (8 kbit/s: MPEG-2.5 Layer III's floor, and
# below every speech setting of AAC and Opus in common use): a file's size over it is the longest
# it can play, which sizes a reservation before the file is read.
FLOOR_BYTES_PER_SECOND = 1000
# When neither the upstream nor the header tells the duration (a WebM from a live recorder, an MPEG
# stream): 32 kbit/s, the low end of compressed speech, so the estimate errs towards the longer
# duration rather than billing a served call too little.
FALLBACK_BYTES_PER_SECOND = 4000
_SNIFF_BYTES = 12
_WEBM_HEAD = 64 * 1024  # the Segment Info sits within the first few KB of a WebM file


def upper_bound_seconds(size: int) -> Fraction:
    """The longest a file of ``size`` bytes can plausibly play (see FLOOR_BYTES_PER_SECOND)."""
    return Fraction(max(size, 1), FLOOR_BYTES_PER_SECOND)


def fallback_seconds(size: int) -> Fraction:
    """The duration billed when nothing reports one (see FALLBACK_BYTES_PER_SECOND)."""
    return Fraction(max(size, 1), FALLBACK_BYTES_PER_SECOND)


def sniff(head: bytes) -> str | None:
    """The container of a file from its first bytes (at least 12 for a sure answer), or None."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "wav"
    if head[:3] == b"ID3" or (len(head) >= 4 and head[0] == 0xFF and frame_info(head[1], head[2])):
        return "mp3"
    if head[4:8] == b"ftyp":
        return "mp4"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    if head[:4] in (b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3"):
        return "mpeg"
    return None


# A header handler gets (offset, bytes) and answers the next (offset, length) to collect, or None.
_Next = tuple[int, int] | None


class _Walker:
    """Collects ``want`` bytes at absolute offset ``at`` from a stream fed in order, hands them to
    ``on_bytes``, and goes on where that says."""

    def __init__(self, at: int, want: int, on_bytes: Callable[[int, bytes], _Next]) -> None:
        self._next: _Next = (at, want)
        self._buf = bytearray()
        self._on_bytes = on_bytes

    @property
    def done(self) -> bool:
        return self._next is None

    def feed(self, chunk: bytes, offset: int) -> None:
        while self._next is not None:
            at, want = self._next
            if len(self._buf) < want:
                pos = at + len(self._buf) - offset
                if pos >= len(chunk):
                    return
                if pos < 0:  # a target behind the stream (a handler pointed backwards): stop
                    self._next = None
                    return
                self._buf += chunk[pos:pos + want - len(self._buf)]
                if len(self._buf) < want:
                    return
            data, self._buf = bytes(self._buf), bytearray()
            nxt = self._on_bytes(at, data)
            if nxt is not None and nxt[0] < at:
                nxt = None
            elif nxt is not None and nxt[0] < at + want:
                # The next target starts inside the bytes just collected (a box's children after
                # its header, a short frame after the first frame's 64 bytes): reuse them.
                self._buf += data[nxt[0] - at:nxt[0] - at + nxt[1]]
            self._next = nxt


class AudioProbe:
    """Feed every byte of a file in order (``feed``), then read ``format`` and ``seconds()``."""

    def __init__(self) -> None:
        self.size = 0
        self.format: str | None = None
        self._head = bytearray()
        self._walker: _Walker | None = None
        self._sniffed = False
        self._mode = "chunk"  # what the walker's next bytes are: a header, or a payload asked for
        # WAV
        self._byte_rate = 0
        self._fmt_next: _Next = None
        self._data_at: int | None = None
        self._data_size = 0
        self._mp3: Mp3Frames | None = None
        # MP4 / WebM
        self._header_seconds: Fraction | None = None

    def feed(self, chunk: bytes) -> None:
        offset = self.size
        self.size += len(chunk)
        if not self._sniffed:
            earlier = bytes(self._head)  # fewer than 12 bytes: everything before this chunk
            self._head += chunk[: _WEBM_HEAD]
            if len(self._head) < _SNIFF_BYTES:
                return
            self._start()
            self._feed_parsers(earlier, 0)
            self._feed_parsers(chunk, offset)
            return
        if self.format == "webm" and len(self._head) < _WEBM_HEAD:
            self._head += chunk[: _WEBM_HEAD - len(self._head)]
        self._feed_parsers(chunk, offset)

    def _feed_parsers(self, chunk: bytes, offset: int) -> None:
        if self._mp3 is not None:
            self._mp3.feed(chunk, offset)
        elif self._walker is not None and not self._walker.done:
            self._walker.feed(chunk, offset)

    def _start(self) -> None:
        self._sniffed = True
        self.format = sniff(bytes(self._head))
        if self.format == "wav":
            self._walker = _Walker(12, 8, self._wav_chunk)
        elif self.format == "mp3":
            self._mp3 = Mp3Frames(id3_skip(bytes(self._head)))
        elif self.format == "mp4":
            self._walker = _Walker(0, 16, self._mp4_box)
        if self.format != "webm":
            self._head = bytearray()  # only WebM is parsed from its head

    def seconds(self) -> Fraction | None:
        """The duration the header tells (None when it tells nothing). Call after the last byte."""
        if not self._sniffed and self._head:  # a file shorter than the sniffing window
            head = bytes(self._head)
            self._start()
            self._feed_parsers(head, 0)
        if self.format == "wav":
            return self._wav_seconds()
        if self._mp3 is not None:
            self._mp3.finish()
            return self._mp3.seconds(self.size)
        if self.format == "webm":
            return _webm_seconds(bytes(self._head))
        return self._header_seconds

    # --- WAV ----------------------------------------------------------------------------------------

    def _wav_chunk(self, at: int, data: bytes) -> _Next:
        if self._mode == "fmt":  # the 16 bytes of a fmt chunk's payload: bytes/s at offset 8
            self._mode = "chunk"
            self._byte_rate = struct.unpack("<I", data[8:12])[0]
            return self._fmt_next
        kind, size = data[:4], struct.unpack("<I", data[4:8])[0]
        after = at + 8 + size + (size & 1)  # chunks are padded to an even length
        if kind == b"fmt " and size >= 16:
            self._mode, self._fmt_next = "fmt", (after, 8)
            return at + 8, 16
        if kind == b"data":
            self._data_at, self._data_size = at + 8, size
            return None
        return after, 8

    def _wav_seconds(self) -> Fraction | None:
        if self._data_at is None or self._byte_rate <= 0:
            return None
        present = max(self.size - self._data_at, 0)
        # 0 or 0xFFFFFFFF: a recorder that never went back to write the size; else trust what came.
        size = present if self._data_size in (0, 0xFFFFFFFF) else min(self._data_size, present)
        return Fraction(size, self._byte_rate)

    # --- MP4 ----------------------------------------------------------------------------------------

    def _mp4_box(self, at: int, data: bytes) -> _Next:
        if self._mode == "mvhd":  # version, flags, times, then timescale and duration
            if data[0] == 1:
                timescale, duration = struct.unpack(">IQ", data[20:32])
            else:
                timescale, duration = struct.unpack(">II", data[12:20])
            if timescale > 0:
                self._header_seconds = Fraction(duration, timescale)
            return None
        size, kind = struct.unpack(">I", data[:4])[0], data[4:8]
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[8:16])[0], 16
        if kind == b"moov":
            return at + header, 16
        if kind == b"mvhd":
            self._mode = "mvhd"
            return at + header, 32
        if size < header:  # 0: the box runs to the end of the file; less: corrupt
            return None
        return at + size, 16


# --- WebM (EBML) ----------------------------------------------------------------------------------

_SEGMENT, _INFO, _TIMECODE_SCALE, _DURATION = 0x18538067, 0x1549A966, 0x2AD7B1, 0x4489
_CLUSTER, _TRACKS = 0x1F43B675, 0x1654AE6B


def _vint(data: bytes, at: int, keep_marker: bool) -> tuple[int, int] | None:
    """(value, length) of an EBML variable-size integer at ``at``; None past the end or invalid.
    A size of all ones (unknown) comes back as -1."""
    if at >= len(data) or data[at] == 0:
        return None
    first = data[at]
    length = 9 - first.bit_length()
    if at + length > len(data):
        return None
    value = first if keep_marker else first & ((1 << (8 - length)) - 1)
    for byte in data[at + 1:at + length]:
        value = value << 8 | byte
    if not keep_marker and value == (1 << (7 * length)) - 1:
        return -1, length
    return value, length


def _webm_seconds(head: bytes) -> Fraction | None:
    """Segment > Info > Duration x TimecodeScale (nanoseconds per tick, default 1 ms)."""
    at, end = 0, len(head)
    scale, duration = 1_000_000, None
    while at < end:
        ident = _vint(head, at, keep_marker=True)
        size = _vint(head, at + ident[1], keep_marker=False) if ident else None
        if ident is None or size is None:
            break
        body = at + ident[1] + size[1]
        if ident[0] in (_SEGMENT, _INFO):  # masters we look inside
            if ident[0] == _INFO and size[0] >= 0:
                end = min(end, body + size[0])
            at = body
            continue
        if ident[0] in (_CLUSTER, _TRACKS) or size[0] < 0 or body + size[0] > len(head):
            break
        payload = head[body:body + size[0]]
        if ident[0] == _TIMECODE_SCALE and payload:
            scale = int.from_bytes(payload, "big") or scale
        elif ident[0] == _DURATION and len(payload) in (4, 8):
            duration = struct.unpack(">f" if len(payload) == 4 else ">d", payload)[0]
        at = body + size[0]
    if duration is None or not duration > 0 or duration == float("inf"):
        return None
    return Fraction(duration) * scale / 1_000_000_000
