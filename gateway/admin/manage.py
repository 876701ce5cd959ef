"""Admin endpoints the web console's management pages need beyond CONTRACT section 4 (issue 35):

* ``GET /admin/groups``: the config's user groups (price ratio, model allowlist, default rate
  limits) with how many live users each has;
* ``POST /admin/upstreams/{name}/reset``: end an upstream's cool-down now, so that it is tried in
  its normal order again. Health lives in each gateway process: the worker that answers ends its
  own and leaves a notice for the other workers of its ``gateway serve --workers N``
  (``gateway.runtime.workers.leave_notice``), which end theirs on its signal (``watch_resets``).

Like the rest of the admin API: ``Authorization: Bearer <admin_key>``, JSON in and out.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.admin.api import _ops
from gateway.admin.ops import upstreams
from gateway.edge.http import endpoint, get_gateway, json_response
from gateway.edge.openapi import documented
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.context import Gateway
from gateway.runtime.errors import NotFound
from gateway.runtime.workers import NOTICE_SIGNAL, NoticeBox, leave_notice

RESET_TOPIC = "cooldown-reset"  # a notice's text: the upstream's name


@endpoint(DEFAULT_FAMILY)
@documented("The user groups of the config")
async def groups_route(request: Request) -> Response:
    ops = _ops(request)
    members: dict[str, int] = {}
    for user in await ops.storage.list_users():
        members[user.group] = members.get(user.group, 0) + 1
    rows: list[dict[str, Any]] = [
        {"name": name, "ratio": group.ratio, "models": group.models, "rpm": group.rpm, "tpm": group.tpm,
         "users": members.get(name, 0)}
        for name, group in sorted(ops.config.groups.items())]
    return json_response({"data": rows})


@endpoint(DEFAULT_FAMILY)
@documented("End an upstream's cool-down now")
async def reset_upstream_route(request: Request) -> Response:
    ops = _ops(request)
    name = request.path_params["name"]
    if not any(u.name == name for u in ops.config.upstreams):
        raise NotFound(f"No upstream named {name[:100]!r}.")
    pool = get_gateway(request).upstreams
    was_cooling = pool.end_cooldown(name)
    leave_notice(RESET_TOPIC, name)  # every other worker of this serve ends it too
    row = next(r for r in upstreams(pool, ops)["data"] if r["name"] == name)
    return json_response({**row, "was_cooling_down": was_cooling})


def admin_manage_routes() -> list[BaseRoute]:
    return [
        Route("/admin/groups", groups_route, methods=["GET"]),
        Route("/admin/upstreams/{name}/reset", reset_upstream_route, methods=["POST"]),
    ]


def watch_resets(gateway: Gateway) -> None:
    """This worker ends the cool-downs another worker was asked to end (``NOTICE_SIGNAL``)."""
    box = NoticeBox()

    def on_notice() -> None:
        for name in box.unread(RESET_TOPIC):
            gateway.upstreams.end_cooldown(name)

    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread
        asyncio.get_running_loop().add_signal_handler(NOTICE_SIGNAL, on_notice)


def unwatch_resets() -> None:
    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
        asyncio.get_running_loop().remove_signal_handler(NOTICE_SIGNAL)
