"""Why a hold was refused, when a budget is the reason (issue 36 point 3, CONTRACT 7).

The database decides (the reservation's conditional updates check the budgets with the balance and
the key's ceiling, ``gateway.storage.sql_budget``); this only names the refusal afterwards, from the
key and the user as they are now: 429 ``budget_exceeded`` with ``Retry-After`` until the end of
the period of the budget that is short (the later one when both are), so that a client waits for
the period that gives it room again. When the balance or the key's ceiling is short too, the
refusal stays ``insufficient_quota``: waiting would not help, a top-up would.
"""

from __future__ import annotations

import datetime

import msgspec

from gateway.accounts import budget_periods
from gateway.accounts.budget_periods import budget_room, period_end, seconds_to_end
from gateway.accounts.money import nano_to_usd
from gateway.accounts.ratelimit_headers import remember
from gateway.accounts.ratelimit_verdict import Verdict
from gateway.accounts.records import KeyRecord, UserRecord
from gateway.runtime.errors import BudgetExceeded
from gateway.runtime.observe import current_scope

_ADJECTIVE = {"day": "daily", "week": "weekly", "month": "monthly"}


def budget_refusal(amount_nano: int, key: KeyRecord, user: UserRecord) -> BudgetExceeded | None:
    """The refusal to raise when a budget of ``key`` or ``user`` (read after the refusal) is what
    cannot cover ``amount_nano``; None when the balance or the key's ceiling is short, or no budget
    is. Leaves the ``Retry-After`` for the answer (the request's rate-limit verdict)."""
    if user.balance_nano < amount_nano:
        return None
    if key.quota_nano is not None and key.quota_nano - key.spent_nano - key.reserved_nano < amount_nano:
        return None
    now = budget_periods.clock()  # looked up on each call: the tests' seam replaces it
    short: list[tuple[str, str, int, int]] = []  # whose, period, budget, room
    budgets: list[tuple[str, str, int, int]] = []  # every budget there is, short now or not
    for whose, record in (("API key's", key), ("account's", user)):
        room = budget_room(record.budget_nano, record.budget_period, record.budget_start,
                           record.budget_spent_nano, record.reserved_nano, now)
        if room is None or record.budget_nano is None:
            continue
        entry = (whose, record.budget_period or "", record.budget_nano, room)
        budgets.append(entry)
        if room < amount_nano:
            short.append(entry)
    if not budgets:
        return None
    if not short:
        # The database refused with the balance and the ceiling in room: a budget was short then, and
        # holds that ended since (read after the refusal) gave its room back. The tightest one it was.
        short = [min(budgets, key=lambda s: s[3])]
    whose, period, budget, room = max(short, key=lambda s: period_end(s[1], now) or 0)
    wait_s = seconds_to_end(period, now)
    _retry_after(wait_s)
    ends = period_end(period, now) or 0
    return BudgetExceeded(
        f"Budget exceeded: this request may cost up to ${nano_to_usd(amount_nano):.6f}, but the {whose} "
        f"{_ADJECTIVE.get(period, period)} budget (budget_usd ${nano_to_usd(budget):.6f}) allows only "
        f"${nano_to_usd(room):.6f} more until the period ends at {_utc(ends)} (in {wait_s}s).")


def _retry_after(wait_s: int) -> None:
    """Put ``Retry-After`` on the answer through the request's verdict (the x-ratelimit-* windows
    of a rate-limited key, when it has some, are kept)."""
    scope = current_scope()
    verdict = scope.verdict if scope is not None and scope.verdict is not None else Verdict(allowed=False)
    remember(msgspec.structs.replace(verdict, allowed=False, retry_after_s=float(wait_s)))


def _utc(ts: int) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
