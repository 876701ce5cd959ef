"""Video task A (``/videoa``, a Kling/Seedance style API) on the gateway's task engine.

Modules, one job each:

* ``wire``: the Structs of client bodies, answers (spec 2.3), upstream views and what a task keeps;
* ``validation``: the rules of spec 4.10 and 8 (models, generation types, duration, aspect ratio,
  resolution, material counts and seconds), each a 400 naming the field; ``media``: one media URL
  (public http(s), or a data URL: at most 100 MB, seconds read from its header);
* ``routes``: submit, status and the mp4 download (relayed by the core, ``gateway.tasks.download``);
* ``upstream``: the ``videoa`` adapter, the submit call, and ``VideoaTasks``, the family as the
  task engine sees it (status meanings, actual charge);
* ``family``: the paths, Bearer credential, envelope and the 200 MB submit body limit;
* ``simulator``: the simulator's video-A upstream.

Money (spec 3.2 and 8): ``per_second`` x ``duration`` (with the group ratio) is held at submit
(``billing_status`` ``reserved``; ``credits`` in the submit answer and the status object is that
hold in USD). On completion the task is charged for the seconds the upstream reports making (never
more than the hold; the hold when it reports none) and ``credits`` becomes that charge
(``charged``); a failure, a timeout or a task the upstream forgot is refunded in full
(``refunded``, ``credits`` 0). Remote media's seconds are the upstream's to judge (see ``media``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.videoa.family import WIRE_FAMILY
from translators.videoa.upstream import ADAPTER, VideoaTasks

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily
    from gateway.api.tasks import TaskFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.videoa.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [ADAPTER]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]


@hookimpl
def gateway_task_families() -> list[TaskFamily]:
    return [VideoaTasks()]
