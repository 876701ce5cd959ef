"""The operator's half of the admin API (CONTRACT section 4, issue 15): change, disable and delete
users, adjust a balance with a reason, everyone's request log, upstream health, models and prices.

Built on ``AdminOps`` (``gateway.admin.api``) so that the routes here and the ``gateway users ...``
commands behave the same; every change ends with ``AdminOps.changed`` (the auth cache
invalidation), so a disabled or deleted user's keys are refused at once, in every process.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.accounts.money import nano_to_usd, usd_to_nano
from gateway.accounts.records import RequestLog
from gateway.admin.api import (
    INT64_MAX,
    AdminOps,
    Name,
    Usd,
    _ops,
    _path_id,
    name_taken,
    optional_nano,
)
from gateway.admin.budgets import BudgetPeriod, budget_changes, changes_budget
from gateway.admin.idempotency import admin_caller, idempotent
from gateway.edge.http import decode_body, endpoint, get_gateway, json_response, read_json_body, request_id
from gateway.edge.openapi import documented
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.errors import InvalidRequest, NotFound
from gateway.storage.rows import LogFilter, NameTaken, UserChanges
from gateway.upstream.pool import UpstreamPool

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 20
MAX_PAGE = 1_000_000_000  # keeps the row offset far inside a 64-bit integer


class UserPatch(msgspec.Struct, forbid_unknown_fields=True):
    name: Name | msgspec.UnsetType = msgspec.UNSET
    group: str | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    soft_limit_usd: Usd | msgspec.UnsetType | None = msgspec.UNSET  # alert threshold; null clears
    budget_usd: Usd | msgspec.UnsetType | None = msgspec.UNSET  # per budget_period; null clears
    budget_period: BudgetPeriod | msgspec.UnsetType | None = msgspec.UNSET


class Adjust(msgspec.Struct, forbid_unknown_fields=True):
    amount_usd: Annotated[float, msgspec.Meta(ge=-1_000_000_000, le=1_000_000_000)]
    reason: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]


def log_json(log: RequestLog) -> dict[str, Any]:
    """A request-log row as the admin API and the console show it (money also in USD). A refusal
    before any valid key (stored with ids 0) shows ``user_id`` and ``key_id`` null (CONTRACT 6a)."""
    return {**msgspec.structs.asdict(log), "user_id": log.user_id or None, "key_id": log.key_id or None,
            "cost_usd": nano_to_usd(log.charge_nano)}


# --- operations ----------------------------------------------------------------------------------

async def update_user(ops: AdminOps, user_id: int, body: UserPatch) -> dict[str, Any]:
    if isinstance(body.group, str) and body.group not in ops.config.groups:
        raise InvalidRequest(f"Invalid value for `group`: unknown group {body.group!r}.", param="group")
    budget: dict[str, Any] = {}
    if changes_budget(body.budget_usd, body.budget_period):
        budget = budget_changes(body.budget_usd, body.budget_period, await ops.storage.get_user(user_id))
    try:
        user = await ops.storage.update_user(user_id, UserChanges(
            name=body.name, group=body.group, enabled=body.enabled,
            soft_limit_nano=optional_nano(body.soft_limit_usd), **budget))
    except NameTaken:
        raise name_taken(str(body.name)) from None
    if user is None:
        raise NotFound(f"No user with id {user_id}.")
    await ops.changed()
    return await ops.shown_json(user)


async def delete_user(ops: AdminOps, user_id: int) -> None:
    if not await ops.storage.delete_user(user_id):
        raise NotFound(f"No user with id {user_id}.")
    await ops.changed()


async def adjust(ops: AdminOps, user_id: int, body: Adjust, rid: str) -> dict[str, Any]:
    """Add (or, negative, take away) an amount, with a ledger row that keeps the reason."""
    if body.amount_usd == 0:
        raise InvalidRequest("Invalid value for `amount_usd`: must not be 0.", param="amount_usd")
    if not body.reason.strip():
        raise InvalidRequest("Invalid value for `reason`: must not be blank.", param="reason")
    nano = usd_to_nano(abs(body.amount_usd)) * (1 if body.amount_usd > 0 else -1)
    user = await ops.storage.adjust_balance(user_id, nano, body.reason.strip(), rid)
    if user is None:
        current = await ops.storage.get_user(user_id)
        if current is None:
            raise NotFound(f"No user with id {user_id}.")
        raise InvalidRequest(f"Invalid value for `amount_usd`: the balance is "
                             f"{nano_to_usd(current.balance_nano)} USD and may not go below 0.",
                             param="amount_usd", code="balance_below_zero")
    await ops.changed()
    return await ops.shown_json(user)


async def logs(ops: AdminOps, where: LogFilter, page: int, page_size: int) -> dict[str, Any]:
    found = await ops.storage.query_logs(where, page, page_size)
    return {"data": [log_json(log) for log in found.items], "total": found.total,
            "page": page, "page_size": page_size, "next_before": found.next_before}


def upstreams(pool: UpstreamPool, ops: AdminOps) -> dict[str, Any]:
    rows = []
    for upstream in ops.config.upstreams:
        until = pool.cooling_until(upstream.name)
        stats = pool.health.stats(upstream.name)
        rows.append({"name": upstream.name, "protocol": upstream.protocol,
                     "state": "cooling_down" if until is not None else "healthy",
                     "cooling_until": until, "error_rate": stats.error_rate, "attempts": stats.attempts,
                     "failures": stats.failures, "latency_ms": stats.latency_ms,
                     "window_s": pool.health.window_s, "priority": upstream.priority,
                     "weight": upstream.weight, "models": sorted(upstream.model_map())})
    return {"data": rows}


def models(ops: AdminOps) -> dict[str, Any]:
    routes: dict[str, list[str]] = {}
    for upstream in ops.config.upstreams:
        for public in upstream.model_map():
            routes.setdefault(public, []).append(upstream.name)
    return {"data": [{"id": m.id, "owned_by": m.owned_by,
                      "price": {k: v for k, v in msgspec.to_builtins(m.price).items() if v is not None},
                      "max_output_tokens": m.max_output_tokens, "upstreams": routes.get(m.id, [])}
                     for m in ops.config.models],
            "rmb_per_usd": ops.config.billing.rmb_per_usd}


# --- query parameters ----------------------------------------------------------------------------

def int_query(request: Request, name: str, low: int, high: int, default: int | None = None) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return default
    value = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 19 else None
    if value is None or not low <= value <= high:
        raise InvalidRequest(f"Invalid value for `{name}`: expected an integer from {low} to {high}, "
                             f"got {raw[:40]!r}.", param=name)
    return value


def log_filter(request: Request, user_id: int | None = None) -> LogFilter:
    """The filters of ``GET /admin/logs`` (and of the console's own log view, where ``user_id`` is
    the caller's and not taken from the query)."""
    q = request.query_params
    return LogFilter(
        user_id=user_id if user_id is not None else int_query(request, "user_id", 1, INT64_MAX),
        key_id=int_query(request, "key_id", 1, INT64_MAX),
        model=q.get("model") or None,
        status=int_query(request, "status", 100, 599),
        request_id=q.get("request_id") or None,
        since=int_query(request, "since", 0, INT64_MAX),
        until=int_query(request, "until", 0, INT64_MAX),
        before=int_query(request, "before", 1, INT64_MAX))


def paging(request: Request) -> tuple[int, int]:
    page = int_query(request, "page", 1, MAX_PAGE, 1)
    size = int_query(request, "page_size", 1, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE)
    assert page is not None and size is not None
    return page, size


# --- routes --------------------------------------------------------------------------------------

@endpoint(DEFAULT_FAMILY)
@documented("Change a user", request=UserPatch)
async def patch_user_route(request: Request) -> Response:
    ops = _ops(request)
    body = decode_body(await read_json_body(request), UserPatch)
    return json_response(await update_user(ops, _path_id(request), body))


@endpoint(DEFAULT_FAMILY)
async def delete_user_route(request: Request) -> Response:
    await delete_user(_ops(request), _path_id(request))
    return Response(status_code=204)


@endpoint(DEFAULT_FAMILY)
@documented("Adjust a user's quota (a ledger entry with a reason)", request=Adjust)
@idempotent(admin_caller)
async def adjust_route(request: Request) -> Response:
    ops = _ops(request)
    body = decode_body(await read_json_body(request), Adjust)
    # Read your writes: a lowering is checked against the balance as the calls left it (what this
    # process's quota leases hold unused is given back first).
    await get_gateway(request).meter.settled()
    return json_response(await adjust(ops, _path_id(request), body, request_id(request)))


@endpoint(DEFAULT_FAMILY)
async def logs_route(request: Request) -> Response:
    ops = _ops(request)
    page, size = paging(request)
    await get_gateway(request).meter.settled()  # read your writes: calls already answered are listed
    return json_response(await logs(ops, log_filter(request), page, size))


@endpoint(DEFAULT_FAMILY)
async def upstreams_route(request: Request) -> Response:
    ops = _ops(request)
    return json_response(upstreams(get_gateway(request).upstreams, ops))


@endpoint(DEFAULT_FAMILY)
async def models_route(request: Request) -> Response:
    return json_response(models(_ops(request)))


def admin_ops_routes() -> list[BaseRoute]:
    return [
        Route("/admin/users/{id}", patch_user_route, methods=["PATCH"]),
        Route("/admin/users/{id}", delete_user_route, methods=["DELETE"]),
        Route("/admin/users/{id}/adjust", adjust_route, methods=["POST"]),
        Route("/admin/logs", logs_route, methods=["GET"]),
        Route("/admin/upstreams", upstreams_route, methods=["GET"]),
        Route("/admin/models", models_route, methods=["GET"]),
    ]
