"""Per-minute and per-character charges, and which duration is billed."""

from __future__ import annotations

from fractions import Fraction

import orjson

from gateway.accounts.money import TokenPrices
from gateway.wire.audio_duration import AudioProbe
from tests.translators.audio import audio_samples as samples
from translators.audio.billing import (
    audio_cost,
    billed_seconds,
    reservation_seconds,
    speech_cost,
    upstream_seconds,
)

JSON = "application/json"


def test_upstream_seconds() -> None:
    assert upstream_seconds(orjson.dumps({"task": "transcribe", "duration": 12.34, "text": ""}), JSON) == \
        Fraction(12.34)
    by_duration = {"text": "", "usage": {"type": "duration", "seconds": 9}}
    by_tokens = {"text": "", "usage": {"type": "tokens", "seconds": 9}}
    assert upstream_seconds(orjson.dumps(by_duration), JSON) == 9
    assert upstream_seconds(orjson.dumps(by_tokens), JSON) is None
    for body in (b"{}", b"not json", b'{"duration": -1}', b'{"duration": "9"}', b"[]"):
        assert upstream_seconds(body, JSON) is None
    assert upstream_seconds(b'{"duration": 5}', "text/plain; charset=utf-8") is None


def _probe(data: bytes) -> AudioProbe:
    probe = AudioProbe()
    probe.feed(data)
    return probe


def test_billed_seconds_prefers_upstream_then_header_then_fallback() -> None:
    wav = _probe(samples.wav(2.2))
    assert billed_seconds(Fraction(10), wav) == 10
    assert billed_seconds(Fraction(1, 100), wav) == 1  # started seconds, at least one
    assert billed_seconds(None, wav) == 3
    assert billed_seconds(Fraction(0), wav) == 3  # an upstream "0" is not believed over the header
    unknown = _probe(b"\x00\x00\x01\xba" + b"\x00" * 40_000)  # an MPEG stream: no header duration
    assert billed_seconds(None, unknown) == 11  # 40,004 bytes at 4 kB/s, rounded up
    assert billed_seconds(None, AudioProbe()) == 1


def test_costs_are_exact() -> None:
    prices = TokenPrices(per_minute=6_000_000, per_second=0, per_mchar=15_000_000_000)
    assert audio_cost(prices, 61, Fraction(1)) == 6_100_000
    assert audio_cost(prices, 1, Fraction(3, 2)) == 150_000
    assert audio_cost(TokenPrices(per_minute=7), 1, Fraction(1)) == 1  # 7/60 nano, rounded up
    assert audio_cost(TokenPrices(per_second=5, per_minute=60), 2, Fraction(1)) == 12
    assert speech_cost(prices, 1000, Fraction(1)) == 15_000_000
    assert speech_cost(TokenPrices(), 1000, Fraction(1)) == 0
    assert reservation_seconds(0) == 1 and reservation_seconds(25 * 1024 * 1024) == 26215
