"""The duration reader: exact from each header, the same under any chunking, never crashing."""

from __future__ import annotations

import os
from fractions import Fraction

import pytest

from gateway.wire.audio_duration import AudioProbe, fallback_seconds, sniff, upper_bound_seconds
from tests.translators.audio import audio_samples as samples


def probe(data: bytes, step: int) -> AudioProbe:
    p = AudioProbe()
    for i in range(0, len(data), step):
        p.feed(data[i:i + step])
    return p


STEPS = [1, 3, 11, 12, 13, 64, 4096, 10**9]


@pytest.mark.parametrize("step", STEPS)
def test_wav_is_exact(step: int) -> None:
    p = probe(samples.wav(2.5), step)
    assert p.format == "wav" and p.seconds() == Fraction(5, 2)


def test_wav_stereo_and_truncated_upload() -> None:
    data = samples.wav(4.0, rate=8000, channels=2)
    assert probe(data, 999).seconds() == 4
    half = data[: 44 + (len(data) - 44) // 2]  # the data chunk says 4 s, only half arrived
    assert probe(half, 999).seconds() == 2


def test_wav_with_unwritten_data_size_uses_the_bytes_that_came() -> None:
    data = bytearray(samples.wav(1.0))
    data[40:44] = b"\xff\xff\xff\xff"
    assert probe(bytes(data), 100).seconds() == 1


@pytest.mark.parametrize("step", STEPS)
def test_mp3_frames_are_counted(step: int) -> None:
    p = probe(samples.mp3_with_id3(200), step)
    assert p.format == "mp3"
    assert p.seconds() == Fraction(200 * 1152, 44100)


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_mp3_xing_header_gives_the_frame_count(step: int) -> None:
    p = probe(samples.mp3_xing(5000), step)
    assert p.seconds() == Fraction(5000 * 1152, 44100)


def test_mp3_lost_sync_estimates_the_rest_at_the_average_rate() -> None:
    data = samples.mp3_frames(100) + b"\x00" * samples.MP3_FRAME_LEN * 100
    assert probe(data, 500).seconds() == Fraction(200 * 1152, 44100)


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("moov_last", [True, False])
@pytest.mark.parametrize("version", [0, 1])
def test_mp4_mvhd(step: int, moov_last: bool, version: int) -> None:
    p = probe(samples.mp4(12.5, moov_last=moov_last, version=version), step)
    assert p.format == "mp4" and p.seconds() == Fraction(25, 2)


@pytest.mark.parametrize("step", [1, 5, 4096])
def test_webm_duration(step: int) -> None:
    p = probe(samples.webm(7.25), step)
    assert p.format == "webm" and p.seconds() == Fraction(29, 4)
    assert probe(samples.webm(3.0, scale=1_000_000_000 // 1000), step).seconds() == 3


def test_webm_without_duration_says_nothing() -> None:
    assert probe(samples.webm(None), 100).seconds() is None


def test_sniff() -> None:
    assert sniff(samples.wav(0.1)) == "wav"
    assert sniff(samples.mp3_frames(1)) == "mp3"
    assert sniff(b"ID3\x03" + b"\x00" * 20) == "mp3"
    assert sniff(samples.mp4(1)) == "mp4"
    assert sniff(samples.webm(1)) == "webm"
    assert sniff(b"\x00\x00\x01\xba" + b"\x00" * 20) == "mpeg"
    for other in (b"", b"OggS\x00\x02" + b"\x00" * 20, b"%PDF-1.7\n" + b"x" * 20, b"\xff\xff\xff\xff" * 4):
        assert sniff(other) is None


def test_tiny_file_shorter_than_the_sniffing_window() -> None:
    p = probe(b"RIFF", 1)
    assert p.format is None and p.seconds() is None


@pytest.mark.parametrize("seed", range(30))
def test_hostile_bytes_never_raise(seed: int) -> None:
    rnd = os.urandom(5000)
    prefixes = [b"RIFF\x00\x00\x00\x00WAVE", b"ID3\x04\x00\x00\x7f\x7f\x7f\x7f", b"\x00\x00\x00\x01ftyp",
                b"\x1a\x45\xdf\xa3", bytes([0xFF, 0xFB, 0x90, 0x00])]
    data = prefixes[seed % len(prefixes)] + rnd
    for step in (1, 17, 5000):
        seconds = probe(data, step).seconds()
        assert seconds is None or seconds >= 0


def test_bounds() -> None:
    assert upper_bound_seconds(25 * 1024 * 1024) > fallback_seconds(25 * 1024 * 1024)
    assert upper_bound_seconds(0) > 0 and fallback_seconds(0) > 0


def _frame(b1: int, b2: int, b3: int = 0x00) -> bytes:
    from gateway.wire.mp3_frames import frame_info
    info = frame_info(b1, b2)
    assert info is not None
    return bytes([0xFF, b1, b2, b3]) + b"\x00" * (info[0] - 4)


@pytest.mark.parametrize("step", [1, 5, 333, 65536])
def test_mp3_vbr_without_xing_and_other_layers_are_exact(step: int) -> None:
    frames = [
        (_frame(0xFB, 0x90), Fraction(1152, 44100)),  # MPEG-1 Layer III 128k 44.1k
        (_frame(0xFB, 0xE2), Fraction(1152, 44100)),  # 320k, padded
        (_frame(0xFB, 0x10), Fraction(1152, 44100)),  # 32k
        (_frame(0xF3, 0x80), Fraction(576, 22050)),  # MPEG-2 Layer III 64k 22.05k
        (_frame(0xE3, 0x18), Fraction(576, 8000)),  # MPEG-2.5 8k 8k
        (_frame(0xFD, 0x94), Fraction(1152, 48000)),  # MPEG-1 Layer II 160k 48k
        (_frame(0xFF, 0x54), Fraction(384, 48000)),  # MPEG-1 Layer I 160k
    ]
    data = b"".join(f for f, _ in frames) * 30
    assert probe(data, step).seconds() == 30 * sum(s for _, s in frames)


def test_mp3_walk_is_bounded_and_extrapolated(monkeypatch: pytest.MonkeyPatch) -> None:
    import gateway.wire.mp3_frames as mp3
    monkeypatch.setattr(mp3, "MAX_FRAMES", 50)
    assert probe(samples.mp3_frames(400), 1000).seconds() == Fraction(400 * 1152, 44100)


def test_mp3_of_a_single_short_frame() -> None:
    assert probe(_frame(0xE3, 0x18), 7).seconds() == Fraction(576, 8000)  # 72 bytes, under the Xing window


def test_worst_case_mp3_walk_is_cheap() -> None:
    import time
    data = _frame(0xE3, 0x18) * (25 * 1024 * 1024 // 72)  # 8 kbit/s: 364,000 frames in 25 MB
    started = time.process_time()
    seconds = probe(data, 65536).seconds()
    assert seconds == Fraction(len(data) // 72 * 576, 8000)
    assert time.process_time() - started < 3.0
