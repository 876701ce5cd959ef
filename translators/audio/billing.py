"""What an audio call costs: transcription per started second of audio (at the model's
``per_minute`` and/or ``per_second`` price), speech per input character (``per_mchar``).

The duration billed is the upstream's own (``duration`` of verbose_json, ``usage.seconds`` of a
json answer), else the file header's (``gateway.wire.audio_duration``), else the size-based
fallback there; it is rounded up to whole seconds, at least one, so a served call never costs $0
when the model has a price.
"""

from __future__ import annotations

import math
from fractions import Fraction

import msgspec

from gateway.api.accounts import TokenPrices, scaled_cost
from gateway.api.wire import AudioProbe, fallback_seconds, upper_bound_seconds


class _UsageView(msgspec.Struct):
    type: str | None = None
    seconds: float | None = None


class _DurationView(msgspec.Struct):
    duration: float | None = None
    usage: _UsageView | None = None


_view = msgspec.json.Decoder(_DurationView)


def upstream_seconds(body: bytes, content_type: str) -> Fraction | None:
    """The duration an upstream's JSON answer reports, if any (text, srt and vtt report none)."""
    if "json" not in content_type:
        return None
    try:
        view = _view.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    seconds = view.duration
    if seconds is None and view.usage is not None and view.usage.type in (None, "duration"):
        seconds = view.usage.seconds
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return None
    return Fraction(seconds)


def billed_seconds(reported: Fraction | None, probe: AudioProbe) -> int:
    """Whole seconds to bill: the upstream's figure, else the header's, else the fallback."""
    seconds = reported
    if seconds is None or seconds <= 0:
        seconds = probe.seconds()
    if seconds is None or seconds <= 0:
        seconds = fallback_seconds(probe.size)
    return max(1, math.ceil(seconds))


def reservation_seconds(size: int) -> int:
    """Seconds to hold for a file of (at most) ``size`` bytes, before a byte of it is read."""
    return max(1, math.ceil(upper_bound_seconds(size)))


def audio_cost(prices: TokenPrices, seconds: int, ratio: Fraction) -> int:
    return (scaled_cost(prices.per_minute, Fraction(seconds, 60), ratio)
            + scaled_cost(prices.per_second, Fraction(seconds), ratio))


def speech_cost(prices: TokenPrices, characters: int, ratio: Fraction) -> int:
    return scaled_cost(prices.per_mchar, Fraction(characters, 1_000_000), ratio)
