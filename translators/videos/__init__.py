"""Video task B (``/v1/videos``, the OpenAI video API with the fields of spec 2.4) on the gateway's
task engine.

Modules: ``wire`` (Structs), ``validation`` (the rules of spec 4.11 and the JSON or multipart
body), ``routes`` (create, retrieve; the video object), ``content`` (the list and the content
download), ``upstream`` (the ``videos`` adapter, the create call, ``VideoTasks`` for the engine),
``family`` (paths, credential, envelope), ``simulator`` (the simulator's video-B upstream).

Statuses are spec 3.3's: ``queued``, ``processing``, ``completed``, ``failed`` (an upstream's
OpenAI-style ``in_progress`` is shown as ``processing``). ``video_url`` and ``thumbnail_url`` are the
gateway's signed links to the files (``gateway.tasks.media``), or the upstream's own with
``media_links: upstream``. An upstream that gives no links (the OpenAI API) is read at its
``/v1/videos/<id>/content``.

Money (spec 8): ``per_second`` x ``seconds`` (with the group ratio) is held at create; on
completion the task is charged for the seconds the upstream reports in ``duration`` (never more
than the hold; the hold when it reports none). Resolution is priced through the model: the price
table has one ``per_second`` per model, so a resolution tier with its own price is its own model id
(e.g. ``videos-pro`` beside ``videos-standard``). Every failure (on the service side, a timeout, a
task the upstream forgot, a refusal) is refunded in full: the engine cannot yet bill part of a
failed task, so "rejected upstream, billed by compute used" is not applied (in the client's
favour).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.videos.family import WIRE_FAMILY
from translators.videos.upstream import ADAPTER, VideoTasks

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily
    from gateway.api.tasks import TaskFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.videos.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [ADAPTER]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]


@hookimpl
def gateway_task_families() -> list[TaskFamily]:
    return [VideoTasks()]
