"""``GET /v1/media/{task_id}/{file}``: a result file of any media task (``media`` explains the
links, ``download`` the relay). Served by the ``plugins.tasks`` plugin.

Who may fetch: whoever holds a link this gateway signed, until it expires (a browser, a callback
receiver: the link is the credential, as an upstream's CDN link is); or, without a signature, the
task's owner with an API key (anyone else: 404). A bad signature is 404 (it says nothing of the
task); an expired one is 403 ``media_link_expired`` (fetching the task again gives fresh links).
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.edge.http import endpoint, get_gateway
from gateway.edge.openapi import documented
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.errors import NotFound, PermissionDenied
from gateway.tasks.download import relay
from gateway.tasks.engine import engine_of
from gateway.tasks.media import MEDIA_PATH, slot_of

__all__ = ["routes"]

_CREDENTIAL_FAMILY = "media"  # no family by that name: a Bearer key, as the gateway's own endpoints


def routes() -> list[BaseRoute]:
    return [Route(MEDIA_PATH + "/{task_id}/{file}", media_file, methods=["GET"])]


@endpoint(DEFAULT_FAMILY)
@documented("A media task's result file (the owner's API key, or a signed link's expires and signature)")
async def media_file(request: Request) -> Response:
    gw = get_gateway(request)
    engine = engine_of(gw)
    task_id, slot = request.path_params["task_id"], slot_of(request.path_params["file"])
    missing = NotFound(f"The file `{slot}` of task `{task_id}` does not exist.", code="media_not_found")
    signature = request.query_params.get("signature")
    if signature is not None:
        expires = request.query_params.get("expires", "")
        if not engine.media.valid(task_id, slot, expires, signature):
            raise missing
        if engine.media.expired(expires):
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(int(expires)))
            raise PermissionDenied(f"This link expired at {when}; fetch the task again for a fresh link.",
                                   code="media_link_expired")
        task = await gw.storage.get_task(task_id)
    else:
        principal = await gw.auth.authenticate(request, _CREDENTIAL_FAMILY)
        task = await gw.storage.get_task(task_id)
        if task is not None and task.user_id != principal.user.id:
            task = None
    if task is None:
        raise missing
    return await relay(engine, request, task, slot)
