"""Handlers of the account endpoints (routes in ``plugins.account``).

Money is integer nano-USD everywhere inside; it is turned into display numbers here only, with
exact arithmetic first and a single rounding at the end: USD amounts and cents (``total_usage``,
``line_items[].cost``: USD x 100 = nano / 1e7) as the nearest float of the exact quotient, RMB
(``billing.rmb_per_usd``) rounded to 6 decimals.

Numbers are read from storage on every call, never from the authentication cache, so a balance
or a ceiling changed a moment ago (or by another gateway process) shows at once.
"""

from __future__ import annotations

import datetime
import re
from fractions import Fraction
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.api import DEFAULT_FAMILY, InvalidApiKey, InvalidRequest, endpoint, get_gateway, json_response
from gateway.api.accounts import (
    NANO_PER_USD,
    DailyCost,
    KeyRecord,
    LogFilter,
    RequestLog,
    UserRecord,
    budget_json,
    nano_to_usd,
    ratio_of,
)

MAX_USAGE_DAYS = 100  # spec section 8: usage query span
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
MAX_PAGE = 1_000_000_000  # keeps the row offset far inside a 64-bit integer
MAX_ROW_ID = 10**12 - 1  # the largest number _INT reads
_NANO_PER_CENT = NANO_PER_USD // 100
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_INT = re.compile(r"[0-9]{1,12}")
_DAY = datetime.timedelta(days=1)


# --- money for display -------------------------------------------------------------------------------

def nano_to_cents(nano: int) -> float:
    """USD x 100, the unit of ``total_usage`` and ``cost`` (int / int is correctly rounded)."""
    return nano / _NANO_PER_CENT


def nano_to_rmb(nano: int, rmb_per_usd: float) -> float:
    """RMB at the configured rate, computed exactly and rounded (half to even) to 6 decimals."""
    return float(round(Fraction(nano, NANO_PER_USD) * ratio_of(rmb_per_usd), 6))


# --- /v1/dashboard/billing/subscription ------------------------------------------------------------

@endpoint(DEFAULT_FAMILY)
async def billing_subscription(request: Request) -> Response:
    """Spec 2.10. ``hard_limit_usd``: the key's own ceiling when it has one, else the user's total
    (balance + spent + held by calls in flight, i.e. every top-up); ``system_hard_limit_usd``
    equals it; ``soft_limit_usd``: the alert threshold on the same scale (the key's own, or the
    user's when the limit is the user's), else the hard limit (CONTRACT 4b); ``access_until``: the
    key's expiry (0 = permanent)."""
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, DEFAULT_FAMILY)
    await gw.meter.settled()  # read your writes: the calls already answered are in the figures
    key, user = await _fresh(request, principal.key.id)
    if key.quota_nano is not None:
        hard = key.quota_nano
    else:
        held = sum(k.reserved_nano for k in await gw.storage.list_keys(user.id))
        hard = user.balance_nano + user.used_nano + held
    hard_usd = nano_to_usd(hard)
    soft = key.soft_limit_nano if key.soft_limit_nano is not None or key.quota_nano is not None \
        else user.soft_limit_nano
    return json_response({
        "object": "billing_subscription",
        "has_payment_method": False,
        "soft_limit_usd": hard_usd if soft is None else nano_to_usd(soft),
        "hard_limit_usd": hard_usd,
        "system_hard_limit_usd": hard_usd,
        "access_until": key.expires_at,
        "plan": {"title": user.group, "id": user.group},
    })


async def _fresh(request: Request, key_id: int) -> tuple[KeyRecord, UserRecord]:
    storage = get_gateway(request).storage
    key = await storage.get_key(key_id)
    user = await storage.get_user(key.user_id) if key is not None else None
    if key is None or user is None:  # deleted since it was cached
        raise InvalidApiKey("Incorrect API key provided.")
    return key, user


# --- /v1/dashboard/billing/usage -------------------------------------------------------------------

@endpoint(DEFAULT_FAMILY)
async def billing_usage(request: Request) -> Response:
    """Spec 2.11, the calling key's charges per UTC day and model. ``start_date`` inclusive,
    ``end_date`` exclusive; every day of the range is listed, days without costs with an empty
    ``line_items`` (as OpenAI's endpoint did)."""
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, DEFAULT_FAMILY)
    start, end = usage_range(request.query_params.get("start_date"), request.query_params.get("end_date"))
    start_ts, end_ts = _day_start(start), _day_start(end)
    await gw.meter.settled()  # read your writes
    costs = await gw.storage.daily_costs(principal.key.id, start_ts, end_ts)
    return json_response(usage_body(start, end, costs))


def usage_range(start_raw: str | None, end_raw: str | None) -> tuple[datetime.date, datetime.date]:
    """Both dates required, ``YYYY-MM-DD``, start before end, at most ``MAX_USAGE_DAYS`` apart."""
    start = _date_param("start_date", start_raw)
    end = _date_param("end_date", end_raw)
    if start >= end:
        raise InvalidRequest("Invalid value for `end_date`: it must be after `start_date` "
                             "(start_date is inclusive, end_date exclusive).", param="end_date")
    if (end - start).days > MAX_USAGE_DAYS:
        raise InvalidRequest(f"Invalid value for `end_date`: the usage query span is at most "
                             f"{MAX_USAGE_DAYS} days.", param="end_date")
    return start, end


def _date_param(name: str, raw: str | None) -> datetime.date:
    if raw is None or not raw.strip():
        raise InvalidRequest(f"Missing required parameter `{name}` (YYYY-MM-DD).", param=name)
    try:
        if not _DATE.fullmatch(raw):
            raise ValueError(raw)
        return datetime.date.fromisoformat(raw)
    except ValueError:
        raise InvalidRequest(f"Invalid value for `{name}`: expected a date as YYYY-MM-DD, got {raw[:40]!r}.",
                             param=name) from None


def _day_start(day: datetime.date) -> int:
    return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp())


def usage_body(start: datetime.date, end: datetime.date, costs: list[DailyCost]) -> dict[str, Any]:
    by_day: dict[str, dict[str, int]] = {}
    total = 0
    for cost in costs:
        if cost.cost_nano <= 0 or not cost.model:
            continue  # failed or released calls: nothing was charged
        models = by_day.setdefault(cost.day, {})
        models[cost.model] = models.get(cost.model, 0) + cost.cost_nano
        total += cost.cost_nano
    daily = []
    day = start
    while day < end:
        models = by_day.get(day.isoformat(), {})
        items = [{"name": name, "cost": nano_to_cents(nano)} for name, nano in sorted(models.items())]
        daily.append({"timestamp": _day_start(day), "line_items": items})
        day += _DAY
    return {"object": "list", "total_usage": nano_to_cents(total), "daily_costs": daily}


# --- /api/user/self and /api/log/self --------------------------------------------------------------

def _envelope(data: Any) -> Response:
    return json_response({"success": True, "message": "", "data": data})


@endpoint(DEFAULT_FAMILY)
async def user_self(request: Request) -> Response:
    """The account behind the user token: balance (``quota``) and settled charges (``used_quota``)
    in RMB, and the number of settled calls."""
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    user = await gw.meter.balance_view(user.id) or user  # read your writes
    rate = gw.config.billing.rmb_per_usd
    return _envelope({
        "id": user.id,
        "username": user.name,
        "group": user.group,
        "quota": nano_to_rmb(user.balance_nano, rate),
        "used_quota": nano_to_rmb(user.used_nano, rate),
        "request_count": user.request_count,
        **budget_json(user),  # budget_usd, budget_period, budget_spent_usd (CONTRACT 7)
    })


@endpoint(DEFAULT_FAMILY)
async def log_self(request: Request) -> Response:
    """One page of the account's request log, newest first (``page`` from 1, ``page_size`` 1-100;
    ``before``: the previous page's ``next_before``, the next page at the same cost at any depth)."""
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    page = _int_param(request, "page", 1, 1, MAX_PAGE)
    page_size = _int_param(request, "page_size", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE)
    before = _int_param(request, "before", 0, 1, MAX_ROW_ID) or None
    await gw.meter.settled()  # read your writes: a call answered a moment ago is listed
    result = await gw.storage.query_logs(LogFilter(user_id=user.id, before=before), page, page_size)
    rate = gw.config.billing.rmb_per_usd
    return _envelope({
        "items": [log_item(log, rate) for log in result.items],
        "total": result.total,
        "page": page,
        "page_size": page_size,
        "next_before": result.next_before,
    })


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    value = int(raw) if _INT.fullmatch(raw.strip()) else None
    if value is None or not low <= value <= high:
        raise InvalidRequest(f"Invalid value for `{name}`: expected an integer from {low} to {high}, "
                             f"got {raw[:40]!r}.", param=name)
    return value


def log_item(log: RequestLog, rmb_per_usd: float) -> dict[str, Any]:
    return {
        "created_at": int(log.created_at),
        "request_id": log.request_id,
        "token_name": log.token_name,
        "model_name": log.model,
        "prompt_tokens": log.prompt_tokens,
        "completion_tokens": log.completion_tokens,
        "cache_read_tokens": log.cache_read_tokens,
        "cache_write_tokens": log.cache_write_tokens,
        "reasoning_tokens": log.reasoning_tokens,
        "quota": nano_to_rmb(log.charge_nano, rmb_per_usd),
        "use_time_ms": log.use_time_ms,
        "first_byte_ms": log.first_byte_ms,
        "is_stream": log.is_stream,
        "ip": log.ip,
        "route": log.route,
        "upstream": log.upstream,
        "attempts": log.attempts,
        "outcome": log.outcome,
        "status": log.status,
        "error_code": log.error_code,
        "usage_estimated": log.usage_estimated,
    }
