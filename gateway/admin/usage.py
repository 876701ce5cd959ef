"""``GET /admin/usage``: spend, tokens, calls and errors over time, for dashboards (admin key).

Answered from the request log's roll-ups only (``gateway.storage.sql_rollup``: hourly and daily
sums kept in the transactions that write the rows, and kept when retention prunes them), never
from raw rows, so a year of a busy gateway is as quick as a day. Query parameters:

* ``bucket``: ``hour`` | ``day`` (default) | ``month`` (UTC);
* ``group_by``: ``user`` | ``key`` | ``model`` | ``group`` | ``upstream`` (one series per value;
  absent: one series, key null). ``upstream`` series carry calls, errors and latency only;
* ``since``, ``until``: Unix seconds, widened to whole buckets (``since`` down, ``until`` up);
  default: the last 30 days (hour: the last 24 hours). At most ``MAX_BUCKETS`` buckets;
* ``user_id``, ``key_id``, ``model``: only those calls (not with ``group_by=upstream``).

The answer (documented in docs/operations.md and the OpenAPI document): ``UsageAnswer``.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any, Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.accounts.money import nano_to_usd
from gateway.admin.api import INT64_MAX, _ops
from gateway.admin.ops import int_query
from gateway.edge.http import endpoint, get_gateway, json_response
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
    series: list[UsageSeries]


_SUMMED = tuple(f for f in UsageFigures.__struct_fields__ if f != "cost_usd")
_COST_AT = _SUMMED.index("cost_nano")
_CALLS_AT = _SUMMED.index("calls")
_POINT: Callable[..., UsagePoint] = UsagePoint  # built from positional values (``_point``)


def _add(into: list[int], values: tuple[int, ...]) -> None:
    for i, v in enumerate(values):
        into[i] += v


def _figures(sums: list[int], cls: type[UsageFigures] = UsageFigures, **extra: int) -> Any:
    return cls(**dict(zip(_SUMMED, sums, strict=True)), cost_usd=nano_to_usd(sums[_COST_AT]), **extra)


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
           rows: list[UsageRow]) -> UsageAnswer:
    """Roll-up rows (per hour or day, one per bucket and key already) as the series of the answer,
    months summed from days. Sums are plain lists while adding: a day of hours by user is
    thousands of rows, and this is most of the answer's time."""
    zero = [0] * len(_SUMMED)
    series: dict[int | str | None, tuple[list[int], dict[int, list[int]]]] = {}
    month_of: dict[int, int] = {}
    for row in rows:
        values = [getattr(row, name) for name in _SUMMED]
        sums, points = series.setdefault(row.key, (list(zero), {}))
        if bucket == "month":
            start = month_of.get(row.start) or month_of.setdefault(row.start, _month_start(row.start))
            point = points.get(start)
            if point is None:
                points[start] = values
            else:
                _add(point, tuple(values))
        else:
            points[row.start] = values
        _add(sums, tuple(values))
    totals = list(zero)
    for sums, _ in series.values():
        _add(totals, tuple(sums))
    # The biggest spenders first (a chart's legend order), then by calls, then by key.
    ordered = sorted(series.items(),
                     key=lambda item: (-item[1][0][_COST_AT], -item[1][0][_CALLS_AT], str(item[0])))
    return UsageAnswer(
        object="usage", bucket=bucket, group_by=group_by, since=since, until=until, totals=_figures(totals),
        series=[UsageSeries(key=key, totals=_figures(sums), points=[
            _point(start, p) for start, p in sorted(points.items())])
            for key, (sums, points) in ordered])


def _point(start: int, sums: list[int]) -> UsagePoint:
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
@documented("Usage over time from the roll-ups (bucket, group_by, since, until, user_id, key_id, model)",
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
    if group_by == "upstream" and (user_id or key_id or model):
        raise InvalidRequest("Invalid value for `group_by`: upstream series cannot be filtered by "
                             "user_id, key_id or model.", param="group_by")
    gateway = get_gateway(request)
    await gateway.meter.settled()  # read your writes: calls already answered are counted
    rows = await gateway.storage.usage_rows(UsageQuery(
        span_s=HOUR_S if bucket == "hour" else DAY_S, since=since, until=until, group_by=group_by,
        user_id=user_id, key_id=key_id, model=model))
    return json_response(answer(bucket, group_by, since, until, rows))


def usage_routes() -> list[BaseRoute]:
    return [Route("/admin/usage", usage_route, methods=["GET"])]
