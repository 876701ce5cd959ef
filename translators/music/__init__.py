"""Music tasks (``/music``, a Suno style API) on the gateway's task engine.

Modules: ``wire`` (Structs), ``validation`` (the rules of spec 4.12, each a 400 naming the
field), ``routes`` (submit, fetch, fetch many; continuations), ``render`` (a stored task as spec 2.5
shows it, callback bodies), ``upstream`` (the ``music`` adapter, the submit call, ``MusicTasks`` for
the engine: batch polls, status meanings), ``family`` (paths, credential, envelope), ``simulator``
(the simulator's music upstream).

* Clips are shown under the gateway's ids, ``<task id>_<n>``; a continuation
  (``continue_clip_id`` + ``continue_at``) names one of the caller's finished clips (anyone else's
  is 404), goes to the upstream that made it with that upstream's clip id, and defaults to its
  model. Without ``model`` a task runs on the first model of the first music upstream.
* ``notify_hook`` passes the engine's SSRF guard at submit (a 400 naming the field) and when sent;
  the gateway POSTs, after each status change, the same body as a fetch of the task
  (``{"code": "success", "data": <task>}``; spec 6.2 shows no payload). It is never sent upstream.
* Money: the model's ``per_task`` price (with the group ratio) is held at submit and charged once
  on ``SUCCESS``; a ``FAILURE`` (upstream overload or rejection, lyrics too long, a timeout, a task
  the upstream forgot) releases it in full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.music.family import WIRE_FAMILY
from translators.music.upstream import ADAPTER, MusicTasks

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily
    from gateway.api.tasks import TaskFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.music.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [ADAPTER]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]


@hookimpl
def gateway_task_families() -> list[TaskFamily]:
    return [MusicTasks()]
