"""Image tasks (``/imagetask``, a Midjourney-proxy style API) on the gateway's task engine.

Modules, one job each:

* ``wire``: the Structs of client bodies, answers, upstream views and what a task keeps;
* ``validation``: field rules (each a 400 naming the field); ``actions``: follow-ups (change,
  zoom, pan, modal, button ``customId``s) and the buttons of a finished task;
* ``routes``: the nine endpoints of spec 4.9; ``render``: a stored task as spec 2.2 shows it;
* ``upstream``: the ``imagetask`` upstream adapter, the submit call, and ``ImageTasks``, the
  family as the task engine sees it (batch polls through list-by-condition, status meanings,
  callback bodies);
* ``family``: the paths, Bearer credential and envelope (``WireFamily``);
* ``simulator``: the simulator's image-task upstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.imagetask.family import WIRE_FAMILY
from translators.imagetask.upstream import ADAPTER, ImageTasks

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily
    from gateway.api.tasks import TaskFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.imagetask.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [ADAPTER]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]


@hookimpl
def gateway_task_families() -> list[TaskFamily]:
    return [ImageTasks()]
