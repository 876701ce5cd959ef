"""Budgets with periods in the admin API, the users' own keys API and the CLI (CONTRACT 7): the
fields a key or a user shows, and the rule a change must keep.

``budget_usd`` is what may be spent per ``budget_period`` (``day``, ``week`` or ``month``, UTC
calendar periods); null is no budget. A budget needs a period: a change that would leave one
without it is a 400 naming ``budget_period``. ``budget_spent_usd`` is the current period's spend
(``gateway.accounts.budget_periods``), null when there is no period to count in.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.accounts.budget_periods import BudgetPeriod, spent_in_period
from gateway.accounts.money import nano_to_usd, usd_to_nano
from gateway.accounts.records import KeyRecord, UserRecord
from gateway.runtime.errors import InvalidRequest

__all__ = ["BudgetPeriod", "budget_changes", "budget_json", "changes_budget", "check_budget"]


def budget_json(record: KeyRecord | UserRecord) -> dict[str, Any]:
    """``budget_usd``, ``budget_period`` and ``budget_spent_usd`` of a key or a user."""
    period = record.budget_period
    spent = None if period is None else nano_to_usd(
        spent_in_period(period, record.budget_start, record.budget_spent_nano))
    return {"budget_usd": None if record.budget_nano is None else nano_to_usd(record.budget_nano),
            "budget_period": period, "budget_spent_usd": spent}


def check_budget(budget_usd: float | None, budget_period: str | None) -> None:
    """The rule a key or a user keeps after a change: a budget has a period."""
    if budget_usd is not None and budget_period is None:
        raise InvalidRequest("Invalid value for `budget_period`: a budget (budget_usd) needs a period: "
                             "day, week or month.", param="budget_period")


def changes_budget(budget_usd: object, budget_period: object) -> bool:
    """Whether a PATCH names ``budget_usd`` or ``budget_period`` (then ``budget_changes`` needs the
    record as it is)."""
    return not (isinstance(budget_usd, msgspec.UnsetType) and isinstance(budget_period, msgspec.UnsetType))


def budget_changes(budget_usd: float | msgspec.UnsetType | None,
                   budget_period: BudgetPeriod | msgspec.UnsetType | None,
                   current: KeyRecord | UserRecord | None) -> dict[str, Any]:
    """The storage changes (``budget_nano``, ``budget_period``) of a create or a PATCH, checked
    against the record as it is (``current``; None on a create): UNSET fields stay as they are."""
    usd_now = None if current is None or current.budget_nano is None else nano_to_usd(current.budget_nano)
    period_now = None if current is None else current.budget_period
    usd = usd_now if isinstance(budget_usd, msgspec.UnsetType) else budget_usd
    period = period_now if isinstance(budget_period, msgspec.UnsetType) else budget_period
    check_budget(usd, period)
    changes: dict[str, Any] = {}
    if not isinstance(budget_usd, msgspec.UnsetType):
        changes["budget_nano"] = None if budget_usd is None else usd_to_nano(budget_usd)
    if not isinstance(budget_period, msgspec.UnsetType):
        changes["budget_period"] = budget_period
    return changes
