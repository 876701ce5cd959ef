"""Read-only JSON views the console's user pages need beyond ``/api/user/self`` and
``/api/log/self``, all with the caller's user token and only ever about the caller:

* ``GET /api/console/summary``: balance and spending in USD and RMB, logged calls today and in all,
  spend today, spend per UTC day over the last 30 days and per model over the same days;
* ``GET /api/console/logs``: the caller's request log with the filters of ``GET /admin/logs``;
* ``GET /api/console/tasks``: the caller's media tasks, newest first, with their result JSON;
* ``GET /api/console/models``: the models the caller's group may use, which of them chat, prices.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import msgspec
import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.api import DEFAULT_FAMILY, Gateway, endpoint, get_gateway, json_response
from gateway.api.accounts import LogFilter, log_filter, log_json, nano_to_usd, paging
from gateway.api.tasks import TaskRecord, engine_of

DAYS = 30
_DAY_S = 86_400


def _day_start(ts: float) -> int:
    return int(ts // _DAY_S * _DAY_S)


@endpoint(DEFAULT_FAMILY)
async def console_summary(request: Request) -> Response:
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    user = await gw.meter.balance_view(user.id) or user  # read your writes
    rate = gw.config.billing.rmb_per_usd
    today = _day_start(time.time())
    start = today - (DAYS - 1) * _DAY_S
    costs = await gw.storage.user_daily_costs(user.id, start, today + _DAY_S)
    per_day: dict[str, int] = {}
    per_model: dict[str, int] = {}
    for cost in costs:
        per_day[cost.day] = per_day.get(cost.day, 0) + cost.cost_nano
        if cost.model:
            per_model[cost.model] = per_model.get(cost.model, 0) + cost.cost_nano
    days = []
    for n in range(DAYS):
        day = datetime.datetime.fromtimestamp(start + n * _DAY_S, tz=datetime.UTC).date().isoformat()
        days.append({"day": day, "cost_usd": nano_to_usd(per_day.get(day, 0))})
    # Both counters count the same thing, the calls of the request log (every outcome), so that
    # today's can never exceed the total (``request_count`` counts only calls that held money).
    today_logs = await gw.storage.query_logs(LogFilter(user_id=user.id, since=today), 1, 1)
    all_logs = await gw.storage.query_logs(LogFilter(user_id=user.id), 1, 1)
    return json_response({
        "user": {"id": user.id, "name": user.name, "group": user.group,
                 "balance_usd": nano_to_usd(user.balance_nano), "used_usd": nano_to_usd(user.used_nano),
                 "request_count": user.request_count},
        "rmb_per_usd": rate,
        "requests_today": today_logs.total,
        "requests_total": all_logs.total,
        "spend_today_usd": days[-1]["cost_usd"],
        "days": days,
        "models": [{"model": m, "cost_usd": nano_to_usd(c)}
                   for m, c in sorted(per_model.items(), key=lambda item: -item[1])],
    })


@endpoint(DEFAULT_FAMILY)
async def console_logs(request: Request) -> Response:
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    await gw.meter.settled()  # read your writes: a call answered a moment ago is listed
    page, size = paging(request)
    found = await gw.storage.query_logs(log_filter(request, user_id=user.id), page, size)
    return json_response({"data": [log_json(log) for log in found.items], "total": found.total,
                          "page": page, "page_size": size, "rmb_per_usd": gw.config.billing.rmb_per_usd})


def task_json(task: TaskRecord) -> dict[str, Any]:
    """What the console shows of a task; the upstream's own id stays inside (CONTRACT 3b)."""
    result: Any = None
    if task.result_json:
        try:
            result = orjson.loads(task.result_json)
        except orjson.JSONDecodeError:
            result = None
    return {"task_id": task.task_id, "family": task.family, "action": task.action, "model": task.model,
            "status": task.status, "progress": task.progress, "fail_reason": task.fail_reason,
            "cost_usd": nano_to_usd(task.charged_nano), "created_at": task.created_at,
            "finished_at": task.finished_at, "result": result}


@endpoint(DEFAULT_FAMILY)
async def console_tasks(request: Request) -> Response:
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    page, size = paging(request)
    tasks, total = await gw.storage.user_tasks(user.id, page, size)
    engine = engine_of(gw)  # result links as the task's own endpoints show them (CONTRACT 6d)
    return json_response({"data": [task_json(engine.shown(request, t)) for t in tasks], "total": total,
                          "page": page, "page_size": size})


def chats(gw: Gateway, model_id: str, output_price: float | None) -> bool:
    """A model the playground can talk to: priced per output token (embeddings, speech, images,
    video and music are not) and served by an upstream whose protocol generates text."""
    return output_price is not None and bool(gw.upstreams.targets(model_id, "generate"))


@endpoint(DEFAULT_FAMILY)
async def console_models(request: Request) -> Response:
    """The models of the caller's group, each with ``chat`` (the playground lists only those) and
    its prices in USD."""
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    group = gw.config.groups.get(user.group) or gw.config.groups.get("default")
    allowed = None if group is None or group.models is None else set(group.models)
    rows = [{"id": m.id, "chat": chats(gw, m.id, m.price.output_per_mtok),
             "price": {k: v for k, v in msgspec.to_builtins(m.price).items() if v is not None}}
            for m in gw.config.models if (allowed is None or m.id in allowed) and "*" not in m.id]
    return json_response({"data": rows, "rmb_per_usd": gw.config.billing.rmb_per_usd})
