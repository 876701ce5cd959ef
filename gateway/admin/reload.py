"""``POST /admin/reload`` (admin key): re-read the config file the gateway serves from
(``gateway.runtime.reload``). 200 ``{"status": "reloaded", "unchanged": false, "restart_needed":
[...]}`` (``unchanged`` true when the file is the one in force); 400 ``invalid_config`` with every
check-config line in ``error.message`` when the file is invalid, which changes nothing. With
several workers the one that answered tells the others (SIGHUP), which reload the same file."""

from __future__ import annotations

import os

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.edge.http import endpoint, get_gateway, json_response
from gateway.edge.openapi import documented
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.errors import InvalidRequest
from gateway.runtime.reload import Reloader, reloader_of, report
from gateway.runtime.workers import signal_workers


@endpoint(DEFAULT_FAMILY)
@documented("Reload the config file: upstreams, models, prices, groups and limits for new calls")
async def reload_route(request: Request) -> Response:
    gateway = get_gateway(request)
    gateway.auth.authenticate_admin(request)
    reloader = reloader_of(gateway) or Reloader(None)
    result = await reloader.reload(gateway)
    report(result, "admin API")
    if result.errors:
        raise InvalidRequest("\n".join(result.errors), code="invalid_config")
    if not result.unchanged:
        signal_workers(skip=os.getpid())
    return json_response({"status": "reloaded", "unchanged": result.unchanged,
                          "restart_needed": result.restart_needed})


def reload_routes() -> list[BaseRoute]:
    return [Route("/admin/reload", reload_route, methods=["POST"])]
