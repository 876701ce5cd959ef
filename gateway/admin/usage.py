"""``GET /admin/usage``: spend, tokens, calls and errors over time, for dashboards (admin key).

Answered from the request log's roll-ups only (``gateway.storage.sql_rollup``: hourly and daily
sums kept in the transactions that write the rows, and kept when retention prunes them), never
from raw rows, so a year of a busy gateway is as quick as a day. Query parameters:

* ``bucket``: ``hour`` | ``day`` (default) | ``month`` (UTC);
* ``group_by``: ``user`` | ``key`` | ``model`` | ``group`` | ``upstream`` (one series per value;
  absent: one series, key null). ``upstream`` series carry calls, errors and latency only;
* ``since``, ``until``: Unix seconds, widened to whole buckets (``since`` down, ``until`` up);
  default: the last 30 days (hour: the last 24 hours). At most ``MAX_BUCKETS`` buckets;
* ``user_id``, ``key_id``, ``model``: only those calls (not with ``group_by=upstream``);
* ``top``: only the ``top`` series that spent most (then most calls), the rest summed in ``others``;
  0: every series. Default ``DEFAULT_TOP`` by user or key (hundreds of users' hourly points are
  megabytes no chart shows), every series otherwise.

The answer (documented in docs/operations.md and the OpenAPI document): ``UsageAnswer``.
"""

from __future__ import annotations

import datetime
import operator
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.accounts.money import nano_to_usd
from gateway.admin.api import INT64_MAX, _ops
from gateway.admin.ops import int_query
from gateway.edge.http import body_response, endpoint, get_gateway
from gateway.edge.openapi import documented
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.errors import InvalidRequest
from gateway.storage.sql_rollup import DAY_S, HOUR_S, span_start
from gateway.storage.usage_rows import GroupBy, UsageQuery, UsageRow

Bucket = Literal["hour", "day", "month"]
MAX_BUCKETS = 2000  # points per series: 83 days of hours, 5 years of days
_DEFAULT_SPAN_S = {"hour": 86400, "day": 30 * 86400, "month": 365 * 86400}
_GROUP_BY: tuple[GroupBy, ...] = ("user", "key", "model", "group", "upstream")


class UsageFigures(msgspec.Struct):
    """What a bucket (or a total) sums. ``cost_usd`` is ``cost_nano`` in USD; errors are calls
    answered with a status other than 2xx; latency sums are the calls' whole durations, first
    byte sums the time to the answer's first byte (per upstream, over ``first_byte_calls``)."""

    calls: int = 0
    errors: int = 0
    stream_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    cost_nano: int = 0
    cost_usd: float = 0.0
    uncharged_nano: int = 0
    latency_ms_sum: int = 0
    first_byte_ms_sum: int = 0
    first_byte_calls: int = 0


class UsagePoint(UsageFigures):
    start: int = 0  # Unix seconds: the bucket's UTC start


class UsageSeries(msgspec.Struct):
    key: int | str | None  # the group_by value: user or key id, model, group or upstream name
    totals: UsageFigures
    points: list[UsagePoint]  # buckets with calls only, oldest first


class UsageAnswer(msgspec.Struct):
    object: Literal["usage"]
    bucket: Bucket
    group_by: GroupBy | None
    since: int
    until: int
    totals: UsageFigures
    series: list[UsageSeries]  # the ``top`` biggest spenders (all with top=0), biggest first
    others: UsageSeries | None = None  # every series past ``top`` summed (key null); null if none
    series_count: int = 0  # how many series there are in all, ``others`` counting its members


_SUMMED = tuple(f for f in UsageFigures.__struct_fields__ if f != "cost_usd")
_COST_AT = _SUMMED.index("cost_nano")
_CALLS_AT = _SUMMED.index("calls")
_POINT: Callable[..., UsagePoint] = UsagePoint  # built from positional values (``_point``)
_FIGURES: Callable[..., UsageFigures] = UsageFigures
_ZERO = (0,) * len(_SUMMED)
# A roll-up row is (start, key, *the sums in _SUMMED order): ``answer`` reads them by position.
assert UsageRow.__struct_fields__[2:] == _SUMMED
DEFAULT_TOP = 20  # series of a group_by user or key unless ``top`` says otherwise; the rest in ``others``
MAX_TOP = 10_000


def _month_start(ts: int) -> int:
    day = datetime.datetime.fromtimestamp(ts, datetime.UTC)
    return int(datetime.datetime(day.year, day.month, 1, tzinfo=datetime.UTC).timestamp())


def _next_month(ts: int) -> int:
    day = datetime.datetime.fromtimestamp(ts, datetime.UTC)
    year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
    return int(datetime.datetime(year, month, 1, tzinfo=datetime.UTC).timestamp())


def bucket_range(bucket: Bucket, since: int | None, until: int | None, now: float) -> tuple[int, int]:
    """[since, until) widened to whole buckets, with the defaults."""
    end = int(now) if until is None else until
    start = end - _DEFAULT_SPAN_S[bucket] if since is None else since
    if bucket == "month":
        first = _month_start(start)
        last = _month_start(end)
        return first, (last if last == end else _next_month(last))
    span = HOUR_S if bucket == "hour" else DAY_S
    last = span_start(end, span)
    return span_start(start, span), (last if last == end else last + span)


def bucket_count(bucket: Bucket, since: int, until: int) -> int:
    if bucket == "month":
        count, ts = 0, since
        while ts < until and count <= MAX_BUCKETS:
            ts, count = _next_month(ts), count + 1
        return count
    return (until - since) // (HOUR_S if bucket == "hour" else DAY_S)


def answer(bucket: Bucket, group_by: GroupBy | None, since: int, until: int,
           rows: list[UsageRow], top: int = 0) -> UsageAnswer:
    """Roll-up rows (per hour or day, one per bucket and key already) as the series of the answer,
    months summed from days; with ``top``, only the ``top`` biggest spenders' series and the rest
    summed in ``others``. Values are plain tuples summed column by column in C (``zip``, ``map``):
    a day of hours by user is thousands of rows, and per-value Python loops were most of the time."""
    series: dict[int | str | None, dict[int, tuple[int, ...]]] = {}
    month_of: dict[int, int] = {}
    for row in rows:
        values = msgspec.structs.astuple(row)
        start: int = values[0]
        if bucket == "month":
            start = month_of.get(start) or month_of.setdefault(start, _month_start(start))
        points = series.setdefault(row.key, {})
        point = points.get(start)
        points[start] = values[2:] if point is None else tuple(map(operator.add, point, values[2:]))
    sums_of = {key: _column_sums(points.values()) for key, points in series.items()}
    # The biggest spenders first (a chart's legend order), then by calls, then by key.
    ordered = sorted(series, key=lambda k: (-sums_of[k][_COST_AT], -sums_of[k][_CALLS_AT], str(k)))
    kept, rest = (ordered[:top], ordered[top:]) if top else (ordered, [])
    others = None
    if rest:
        merged: dict[int, tuple[int, ...]] = {}
        for key in rest:
            for start, values in series[key].items():
                point = merged.get(start)
                merged[start] = values if point is None else tuple(map(operator.add, point, values))
        others = _series(None, _column_sums(sums_of[k] for k in rest), merged)
    return UsageAnswer(
        object="usage", bucket=bucket, group_by=group_by, since=since, until=until,
        totals=_figures(_column_sums(sums_of.values())),
        series=[_series(key, sums_of[key], series[key]) for key in kept],
        others=others, series_count=len(ordered))


def _column_sums(rows: Iterable[Sequence[int]]) -> tuple[int, ...]:
    return tuple(map(sum, zip(*rows, strict=True))) or _ZERO


def _series(key: int | str | None, sums: Sequence[int], points: dict[int, tuple[int, ...]]) -> UsageSeries:
    return UsageSeries(key=key, totals=_figures(sums),
                       points=[_point(start, p) for start, p in sorted(points.items())])


def _figures(sums: Sequence[int]) -> Any:
    cut = _COST_AT + 1
    return _FIGURES(*sums[:cut], nano_to_usd(sums[_COST_AT]), *sums[cut:])


def _point(start: int, sums: Sequence[int]) -> UsagePoint:
    # Positional: the fields in _SUMMED order, cost_usd after cost_nano (kwargs cost twice as much).
    cut = _COST_AT + 1
    return _POINT(*sums[:cut], nano_to_usd(sums[_COST_AT]), *sums[cut:], start)


def _choice(request: Request, name: str, choices: tuple[str, ...], default: str | None) -> str | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    if raw not in choices:
        raise InvalidRequest(f"Invalid value for `{name}`: expected one of {', '.join(choices)}, "
                             f"got {raw[:40]!r}.", param=name)
    return raw


@endpoint(DEFAULT_FAMILY)
@documented("Usage over time from the roll-ups (bucket, group_by, top, since, until, user_id, key_id, "
            "model)",
            response=UsageAnswer)
async def usage_route(request: Request) -> Response:
    _ops(request)  # the admin key
    bucket: Bucket = _choice(request, "bucket", ("hour", "day", "month"), "day")  # type: ignore[assignment]
    group_by: GroupBy | None = _choice(request, "group_by", _GROUP_BY, None)  # type: ignore[assignment]
    asked_since = int_query(request, "since", 0, INT64_MAX // 2)
    asked_until = int_query(request, "until", 0, INT64_MAX // 2)
    if asked_since is not None and asked_until is not None and asked_until <= asked_since:
        raise InvalidRequest("Invalid value for `until`: it must be after `since`.", param="until")
    since, until = bucket_range(bucket, asked_since, asked_until, time.time())
    if bucket_count(bucket, since, until) > MAX_BUCKETS:
        raise InvalidRequest(f"Invalid range: at most {MAX_BUCKETS} buckets of a {bucket} "
                             "(use a larger bucket or a shorter range).", param="since")
    user_id = int_query(request, "user_id", 1, INT64_MAX)
    key_id = int_query(request, "key_id", 1, INT64_MAX)
    model = request.query_params.get("model") or None
    top = int_query(request, "top", 0, MAX_TOP, DEFAULT_TOP if group_by in ("user", "key") else 0)
    assert top is not None
    if group_by == "upstream" and (user_id or key_id or model):
        raise InvalidRequest("Invalid value for `group_by`: upstream series cannot be filtered by "
                             "user_id, key_id or model.", param="group_by")
    gateway = get_gateway(request)
    await gateway.meter.settled()  # read your writes: calls already answered are counted
    rows = await gateway.storage.usage_rows(UsageQuery(
        span_s=HOUR_S if bucket == "hour" else DAY_S, since=since, until=until, group_by=group_by,
        user_id=user_id, key_id=key_id, model=model))
    # Encoded by msgspec straight from the Structs: a dict per point first cost as much as the rest.
    return body_response(msgspec.json.encode(answer(bucket, group_by, since, until, rows, top)))


def usage_routes() -> list[BaseRoute]:
    return [Route("/admin/usage", usage_route, methods=["GET"])]
