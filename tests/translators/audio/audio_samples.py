"""Small valid audio files made in code (no binary fixtures): WAV, MP3 frames, MP4 boxes, WebM."""

from __future__ import annotations

import io
import struct
import wave

MP3_FRAME_HEADER = bytes([0xFF, 0xFB, 0x90, 0x00])  # MPEG-1 Layer III, 128 kbit/s, 44.1 kHz, stereo
MP3_FRAME_LEN = 417  # 144 * 128000 // 44100
MP3_FRAME_SECONDS = 1152 / 44100


def wav(seconds: float, rate: int = 16000, channels: int = 1, width: int = 2) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(width)
        out.setframerate(rate)
        out.writeframes(b"\x01\x00" * int(rate * seconds) * channels * (width // 2))
    return buf.getvalue()


def mp3_frames(count: int) -> bytes:
    return (MP3_FRAME_HEADER + b"\x00" * (MP3_FRAME_LEN - 4)) * count


def mp3_with_id3(count: int) -> bytes:
    tag = b"ID3\x04\x00\x00" + bytes([0, 0, 1, 0]) + b"t" * 128  # syncsafe size 128
    return tag + mp3_frames(count)


def mp3_xing(total_frames: int, present_frames: int = 3) -> bytes:
    first = bytearray(MP3_FRAME_HEADER + b"\x00" * (MP3_FRAME_LEN - 4))
    first[36:48] = b"Xing" + struct.pack(">II", 1, total_frames)
    return bytes(first) + mp3_frames(present_frames)


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", 8 + len(payload)) + kind + payload


def mp4(seconds: float, moov_last: bool = True, version: int = 0, mdat_bytes: int = 4000) -> bytes:
    timescale = 600
    if version == 1:
        mvhd = bytes([1, 0, 0, 0]) + b"\x00" * 16 + struct.pack(">IQ", timescale, int(seconds * timescale))
    else:
        mvhd = b"\x00" * 4 + b"\x00" * 8 + struct.pack(">II", timescale, int(seconds * timescale))
    moov = _box(b"moov", _box(b"mvhd", mvhd + b"\x00" * 80) + _box(b"trak", b"\x00" * 40))
    ftyp = _box(b"ftyp", b"M4A \x00\x00\x00\x00isomM4A ")
    # mdat with a 64-bit size, as large files write it
    mdat = struct.pack(">I", 1) + b"mdat" + struct.pack(">Q", 16 + mdat_bytes) + b"\x5a" * mdat_bytes
    return ftyp + mdat + moov if moov_last else ftyp + moov + mdat


def _ebml(ident: int, payload: bytes) -> bytes:
    ident_bytes = ident.to_bytes((ident.bit_length() + 7) // 8, "big")
    size = len(payload) | (1 << 56)  # 8-byte size vint
    return ident_bytes + size.to_bytes(8, "big") + payload


def webm(seconds: float | None, scale: int = 1_000_000, cluster_bytes: int = 500) -> bytes:
    header = _ebml(0x1A45DFA3, _ebml(0x4282, b"webm"))
    info_items = _ebml(0x2AD7B1, scale.to_bytes(4, "big"))
    if seconds is not None:
        info_items += _ebml(0x4489, struct.pack(">d", seconds * 1e9 / scale))
    cluster = _ebml(0x1F43B675, b"\x00" * cluster_bytes)
    segment = _ebml(0xEC, b"\x00" * 20) + _ebml(0x1549A966, info_items) + cluster
    return header + _ebml(0x18538067, segment)
