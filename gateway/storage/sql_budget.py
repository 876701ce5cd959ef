"""The SQL of budgets with periods (``gateway.accounts.budget_periods``), spliced into the money
transactions of ``sql_money`` so that a budget is checked and counted by the same conditional
updates as the balance and the key's ceiling: never read, then written.

A row's current period start depends on its own ``budget_period``, so the statements take the
starts of the current day, week and month as three parameters (``starts``) and pick the row's with
a ``CASE``. Each fragment below says which parameters it takes, in the order its ``?`` appear.
"""

from __future__ import annotations

from typing import TypedDict

from gateway.accounts.budget_periods import current_starts
from gateway.storage.sql_dialect import Row

Starts = tuple[int, int, int]  # the current day's, week's and month's starts (Unix seconds)


def start_of(t: str = "") -> str:
    """The current start of row ``t``'s period (0 when it has none). Parameters: ``*starts``."""
    return (f"(CASE {t}budget_period WHEN 'day' THEN CAST(? AS BIGINT) WHEN 'week' THEN CAST(? AS BIGINT) "
            f"WHEN 'month' THEN CAST(? AS BIGINT) ELSE 0 END)")


def spent_of(t: str = "") -> str:
    """Row ``t``'s spend in the current period: its count when counted in this period, else 0.
    Parameters: ``*starts``."""
    return f"(CASE WHEN {t}budget_start = {start_of(t)} THEN {t}budget_spent_nano ELSE 0 END)"


def fits(t: str = "") -> str:
    """Row ``t``'s budget (if any) leaves room for ``need`` this period, its open holds counted;
    written as a difference so that no sum can overflow. Parameters: ``need, *starts``."""
    return (f"({t}budget_nano IS NULL OR "
            f"? <= {t}budget_nano - {spent_of(t)} - {t}reserved_nano)")


def counted(t: str = "") -> str:
    """The ``SET`` items that add a charge to row ``t``'s count, moving the count to the current
    period first when it belonged to an earlier one. Parameters: ``*starts, amount, *starts``."""
    return f"budget_spent_nano = {spent_of(t)} + ?, budget_start = {start_of(t)}"


def counted_args(starts: Starts, amount: int) -> tuple[int, ...]:
    return (*starts, amount, *starts)


def now_starts() -> Starts:
    return current_starts()


BUDGET_COLUMNS = "budget_nano, budget_period, budget_start, budget_spent_nano"


class BudgetFields(TypedDict):
    budget_nano: int | None
    budget_period: str | None
    budget_start: int
    budget_spent_nano: int


def budget_fields(row: Row) -> BudgetFields:
    """The ``BUDGET_COLUMNS`` of a key's or a user's row, as their records name them."""
    return BudgetFields(budget_nano=row["budget_nano"], budget_period=row["budget_period"],
                        budget_start=row["budget_start"], budget_spent_nano=row["budget_spent_nano"])


def budget_left(row: Row, starts: Starts) -> int | None:
    """What ``row``'s budget (its ``BUDGET_COLUMNS`` and ``reserved_nano``) still allows in the
    period of ``starts``, its open holds counted; None when it has no budget."""
    if row["budget_nano"] is None:
        return None
    start = {"day": starts[0], "week": starts[1], "month": starts[2]}.get(row["budget_period"] or "", 0)
    spent = row["budget_spent_nano"] if row["budget_start"] == start else 0
    return max(int(row["budget_nano"]) - int(spent) - int(row["reserved_nano"]), 0)
