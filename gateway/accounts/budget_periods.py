"""Budget periods (issue 36 point 3, CONTRACT 7): UTC calendar days, ISO weeks (Monday to Monday)
and months, named by their start in Unix seconds.

A key or a user with ``budget_usd`` counts its spend in ``budget_spent_nano`` together with the
start of the period that spend belongs to (``budget_start``). The count is never reset by a job:
whoever reads or adds to it compares the stored start with the current period's start, and a
stored start that is not the current one means nothing was spent yet in this period. So a period
begins on time on every replica, whether or not anything ran at midnight.

The clock is the one seam the tests turn (``clock``): every period computed by the gateway, in the
reservation SQL, at settlement and in the views, asks ``clock()`` for "now". A test replaces it
(``monkeypatch.setattr(budget_periods, "clock", lambda: t)``) to cross a period's end without
sleeping; production leaves it as ``time.time``.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Literal

BudgetPeriod = Literal["day", "week", "month"]
PERIODS: tuple[BudgetPeriod, ...] = ("day", "week", "month")
_DAY_S = 86_400

clock: Callable[[], float] = time.time  # "now" of every budget period (the tests' seam)


def period_start(period: str | None, now: float | None = None) -> int:
    """The start (Unix seconds, UTC) of the ``period`` that holds ``now``; 0 for no period (a
    count that never resets)."""
    t = clock() if now is None else now
    day = int(t // _DAY_S) * _DAY_S
    if period == "day":
        return day
    if period == "week":  # 1970-01-01 was a Thursday: Monday is 3 days before a multiple of 7 days
        return day - ((day // _DAY_S + 3) % 7) * _DAY_S
    if period == "month":
        d = datetime.fromtimestamp(day, UTC)
        return calendar.timegm((d.year, d.month, 1, 0, 0, 0))
    return 0


def period_end(period: str | None, now: float | None = None) -> int | None:
    """When the ``period`` holding ``now`` ends (the next one's start); None for no period."""
    start = period_start(period, now)
    if period == "day":
        return start + _DAY_S
    if period == "week":
        return start + 7 * _DAY_S
    if period == "month":
        d = datetime.fromtimestamp(start, UTC) + timedelta(days=31)
        return calendar.timegm((d.year, d.month, 1, 0, 0, 0))
    return None


def current_starts(now: float | None = None) -> tuple[int, int, int]:
    """The starts of the current day, week and month: the parameters of the SQL that picks a row's
    own (``gateway.storage.sql_budget``)."""
    t = clock() if now is None else now
    return period_start("day", t), period_start("week", t), period_start("month", t)


def spent_in_period(period: str | None, start: int, spent_nano: int, now: float | None = None) -> int:
    """What a row's count says was spent in the current period: its ``spent_nano`` when it was
    counted in this period, else nothing yet."""
    return spent_nano if start == period_start(period, now) else 0


def budget_room(budget_nano: int | None, period: str | None, start: int, spent_nano: int,
                reserved_nano: int, now: float | None = None) -> int | None:
    """What the budget still allows this period, holds in flight counted (None: no budget)."""
    if budget_nano is None:
        return None
    return max(budget_nano - spent_in_period(period, start, spent_nano, now) - reserved_nano, 0)


def seconds_to_end(period: str | None, now: float | None = None) -> int:
    """Whole seconds, rounded up and at least 1, until the current ``period`` ends (a
    ``Retry-After``)."""
    t = clock() if now is None else now
    end = period_end(period, t)
    return 1 if end is None else max(1, math.ceil(end - t))
