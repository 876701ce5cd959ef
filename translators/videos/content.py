"""The caller's videos (``GET /v1/videos``) and a finished video's bytes
(``GET /v1/videos/{id}/content``), as the openai SDK's ``videos.list()`` and
``videos.download_content()`` call them (CONTRACT 6d).

* The list is the OpenAI cursor page: ``{"object": "list", "data": [...], "first_id", "last_id",
  "has_more"}``, newest first (``order=asc``: oldest first), ``limit`` 1-100 (default 20), ``after``
  a video id of the caller's from an earlier page (the SDK's auto-paging sends ``last_id``). Only
  the caller's videos: another user's id in ``after`` is a 400 naming it, like an unknown one.
* The content is relayed from the upstream as it arrives (``gateway.tasks.download``: SSRF guard,
  constant memory, size and time limits, ``Range`` passed through); ``variant=thumbnail`` is the
  thumbnail. A video that is not finished is 404 ``video_not_ready``; another user's is 404.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.api import NotFound, documented, endpoint, get_gateway, json_response
from gateway.api.tasks import engine_of, relay
from translators.videos import validation as v
from translators.videos.routes import FAMILY, video_out
from translators.videos.wire import VideoList

MAX_LIMIT, DEFAULT_LIMIT = 100, 20
VARIANTS = ("video", "thumbnail", "spritesheet")


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise v.bad("limit", f"a whole number from 1 to {MAX_LIMIT}")
    return int(value)


@endpoint(FAMILY)
@documented("List your videos", response=VideoList)
async def list_videos(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    query = request.query_params
    limit = _limit(query.get("limit"))
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise v.bad("order", "`asc` or `desc`")
    after = None
    if (after_id := query.get("after")) is not None:
        after = await gw.storage.get_task(after_id)
        if after is None or after.user_id != principal.user.id or after.family != FAMILY:
            raise v.bad("after", f"no video `{after_id}` of yours")
    engine = engine_of(gw)
    found = await gw.storage.family_tasks(principal.user.id, FAMILY, limit + 1, after=after,
                                          newest_first=order == "desc")
    page = await engine.refresh(found[:limit])
    data = [video_out(engine.shown(request, t)) for t in page]
    return json_response(VideoList(object="list", data=data, first_id=data[0].id if data else None,
                                   last_id=data[-1].id if data else None, has_more=len(found) > limit))


@endpoint(FAMILY)
@documented("Download a finished video (or its thumbnail)")
async def download_content(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    variant = request.query_params.get("variant", "video")
    if variant not in VARIANTS:
        raise v.bad("variant", f"one of {', '.join(VARIANTS)}")
    engine = engine_of(gw)
    task = await engine.fetch(principal, FAMILY, request.path_params["video_id"])
    if task.status != "completed":
        raise NotFound(f"The video `{task.task_id}` is not ready (status `{task.status}`).",
                       code="video_not_ready")
    return await relay(engine, request, task, variant)
