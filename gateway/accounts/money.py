"""Money at fixed precision: integer nano-USD (1e-9 USD), never floats, in every ledger and balance.

Prices come from the config in USD (per million tokens, per second, per minute, per task); they are
turned into exact integers once, and each charge is rounded up to the next nano-USD so that
rounding never favours spending past a limit.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

import msgspec

from gateway.relay.canonical import Usage
from gateway.settings.config import Price

NANO_PER_USD = 1_000_000_000
_MTOK = 1_000_000


def usd_to_nano(usd: float | str | Decimal) -> int:
    """Exact conversion of a USD amount (as written in config or an API body) to nano-USD."""
    return int((Decimal(str(usd)) * NANO_PER_USD).to_integral_value(rounding=ROUND_CEILING))


def nano_to_usd(nano: int) -> float:
    """For display only (API bodies); never fed back into arithmetic."""
    return nano / NANO_PER_USD


def ratio_of(value: float) -> Fraction:
    """A config ratio (group multiplier) as an exact fraction of its decimal text."""
    return Fraction(Decimal(str(value)))


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _ceil_per_mtok(per_mtok: int, ratio: Fraction) -> int:
    """ceil(per_mtok / 1e6 * ratio) in integers only (no Fraction built on every call)."""
    return -((-per_mtok * ratio.numerator) // (_MTOK * ratio.denominator))


class TokenPrices(msgspec.Struct, frozen=True):
    """Nano-USD per million tokens of each kind."""

    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0
    reasoning: int = 0
    per_second: int = 0
    per_minute: int = 0
    per_task: int = 0
    per_mchar: int = 0  # per million input characters (speech synthesis)
    per_image: int = 0  # per image returned (Images API)

    @classmethod
    def from_config(cls, price: Price) -> TokenPrices:
        """Cache and reasoning rates default to the ecosystem's usual multipliers of the input and
        output prices: cache writes 1.25x input, cache reads 0.1x input, reasoning = output."""
        def nano(v: float | None) -> int:
            return usd_to_nano(v) if v is not None else 0

        input_price = nano(price.input_per_mtok)
        output_price = nano(price.output_per_mtok)
        return cls(
            input=input_price,
            output=output_price,
            cache_write=nano(price.cache_write_per_mtok) if price.cache_write_per_mtok is not None
            else _ceil(Fraction(input_price) * Fraction(5, 4)),
            cache_read=nano(price.cache_read_per_mtok) if price.cache_read_per_mtok is not None
            else _ceil(Fraction(input_price, 10)),
            reasoning=nano(price.reasoning_per_mtok) if price.reasoning_per_mtok is not None
            else output_price,
            per_second=nano(price.per_second),
            per_minute=nano(price.per_minute),
            per_task=nano(price.per_task),
            per_mchar=nano(price.per_mchar),
            per_image=nano(price.per_image),
        )


def usage_cost(prices: TokenPrices, usage: Usage, ratio: Fraction = Fraction(1)) -> int:
    """Nano-USD cost of a text call's usage, rounded up once at the end."""
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    plain_input = max(usage.input_tokens - cached, 0)
    plain_output = max(usage.output_tokens - usage.reasoning_tokens, 0)
    per_mtok = (plain_input * prices.input
                + usage.cache_write_tokens * prices.cache_write
                + usage.cache_read_tokens * prices.cache_read
                + plain_output * prices.output
                + usage.reasoning_tokens * prices.reasoning)
    return _ceil_per_mtok(per_mtok, ratio)


def worst_case_cost(prices: TokenPrices, input_tokens: int, max_output_tokens: int,
                    ratio: Fraction = Fraction(1)) -> int:
    """What a text call may cost at most: every input token uncached at the dearer of the input and
    cache-write prices, every output token at the dearer of the output and reasoning prices."""
    per_mtok = (input_tokens * max(prices.input, prices.cache_write)
                + max_output_tokens * max(prices.output, prices.reasoning))
    return _ceil_per_mtok(per_mtok, ratio)


def unit_cost(unit_price: int, units: float | int, ratio: Fraction = Fraction(1)) -> int:
    """Nano-USD for ``units`` seconds/minutes/tasks at a nano-USD unit price."""
    return _ceil(Fraction(unit_price) * Fraction(Decimal(str(units))) * ratio)


def scaled_cost(unit_price: int, units: Fraction, ratio: Fraction = Fraction(1)) -> int:
    """Nano-USD for an exact fraction of units (seconds of audio / 60 at a per-minute price,
    characters / 1e6 at a per-million price), rounded up once at the end."""
    return _ceil(Fraction(unit_price) * units * ratio)
