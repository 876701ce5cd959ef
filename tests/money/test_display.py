"""Money display of the account endpoints: exact integer arithmetic, one rounding at the end."""

from __future__ import annotations

import datetime

import pytest

from gateway.runtime.errors import InvalidRequest
from gateway.storage.rows import DailyCost
from plugins.account_views import nano_to_cents, nano_to_rmb, usage_body, usage_range


def test_cents_are_nano_over_ten_million() -> None:
    assert nano_to_cents(0) == 0
    assert nano_to_cents(10_000_000) == 1.0  # one cent
    assert nano_to_cents(35_000) == 0.0035
    assert nano_to_cents(1_000_000_000) == 100.0  # one dollar


def test_rmb_is_exact_then_rounded_to_six_decimals() -> None:
    assert nano_to_rmb(1_000_000_000, 7.2) == 7.2
    assert nano_to_rmb(1, 7.2) == 0.0  # 7.2e-9 RMB rounds away
    assert nano_to_rmb(100_000, 7.2) == 0.00072
    # 0.1 + 0.2 style float drift must not appear: 0.3 USD at 7.2 is 2.16 exactly.
    assert nano_to_rmb(300_000_000, 7.2) == 2.16


def _d(text: str) -> datetime.date:
    return datetime.date.fromisoformat(text)


@pytest.mark.parametrize(("start", "end", "param"), [
    (None, "2024-01-02", "start_date"),
    ("2024-01-01", None, "end_date"),
    ("", "2024-01-02", "start_date"),
    ("2024-1-1", "2024-01-02", "start_date"),
    ("20240101", "2024-01-02", "start_date"),
    ("2024-02-30", "2024-03-02", "start_date"),
    ("2024-01-01", "2024-01-01T00:00", "end_date"),
    ("2024-01-02", "2024-01-01", "end_date"),  # reversed
    ("2024-01-01", "2024-01-01", "end_date"),  # empty range
    ("2024-01-01", "2024-04-11", "end_date"),  # 101 days
])
def test_usage_range_rejects(start: str | None, end: str | None, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        usage_range(start, end)
    assert info.value.param == param
    assert param in info.value.message


def test_usage_range_accepts_up_to_100_days() -> None:
    assert usage_range("2024-01-01", "2024-04-10") == (_d("2024-01-01"), _d("2024-04-10"))


def test_usage_body_lists_every_day_and_sums_in_nano() -> None:
    costs = [DailyCost("2024-01-01", "a", 15_000_000), DailyCost("2024-01-01", "b", 5),
             DailyCost("2024-01-03", "a", 25_000_000), DailyCost("2024-01-03", "", 0)]
    body = usage_body(_d("2024-01-01"), _d("2024-01-04"), costs)
    assert body["object"] == "list"
    assert body["total_usage"] == 40_000_005 / 10_000_000
    assert [d["timestamp"] for d in body["daily_costs"]] == [1704067200, 1704153600, 1704240000]
    assert body["daily_costs"][0]["line_items"] == [{"name": "a", "cost": 1.5}, {"name": "b", "cost": 5e-7}]
    assert body["daily_costs"][1]["line_items"] == []
    assert body["daily_costs"][2]["line_items"] == [{"name": "a", "cost": 2.5}]
