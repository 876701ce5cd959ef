"""The endpoints of video task B (spec 4.11): create and retrieve, both answering the video object
of spec 2.4, whose ``video_url`` and ``thumbnail_url`` are the gateway's links (CONTRACT 6d); the
list and the content download are ``content``. Another user's video is 404."""

from __future__ import annotations

import secrets

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    JSON,
    MULTIPART,
    Gateway,
    documented,
    endpoint,
    get_gateway,
    json_response,
    read_json_body,
    request_id,
)
from gateway.api.accounts import Principal, unit_cost
from gateway.api.tasks import Candidate, NewTask, Submitted, TaskRecord, engine_of
from translators.videos import upstream
from translators.videos import validation as v
from translators.videos.family import PREFIX
from translators.videos.wire import CreateBody, Result, Stored, UpstreamBody, VideoError, VideoOut

FAMILY = "videos"
DEFAULT_SIZE = "1280x720"
_encode = msgspec.json.Encoder()
_stored = msgspec.json.Decoder(Stored)
_result = msgspec.json.Decoder(Result)


def routes() -> list[BaseRoute]:
    from translators.videos import content  # its endpoints render with ``video_out`` below

    return [
        Route(PREFIX, create, methods=["POST"]),
        Route(PREFIX + "/{video_id}", retrieve, methods=["GET"]),
        Route(PREFIX, content.list_videos, methods=["GET"]),
        Route(PREFIX + "/{video_id}/content", content.download_content, methods=["GET"]),
    ]


def _candidates(gw: Gateway, principal: Principal, model: str, seconds: int) -> list[Candidate]:
    """The ``videos`` upstreams of ``model``, priced ``per_second`` x ``seconds`` with the caller's
    group ratio (held at create)."""
    gw.catalogue.check(principal, model)
    ratio = gw.catalogue.ratio(principal.user.group)
    price = unit_cost(gw.catalogue.prices(model).per_second, seconds, ratio)
    targets = [t for t in gw.upstreams.targets(model, capability="task") if t.protocol == upstream.PROTOCOL]
    if not targets:
        raise v.bad("model", f"`{model}` is not a video model")
    return [Candidate(t, model, price) for t in targets]


def video_out(task: TaskRecord) -> VideoOut:
    req = _stored.decode(task.request_json) if task.request_json else Stored()
    res = _result.decode(task.result_json) if task.result_json else Result()
    failed = task.status == "failed"
    reason = (task.fail_reason or "the task failed") if failed else None
    return VideoOut(
        id=task.task_id, object="video.task", model=task.model, status=task.status,
        progress=int(task.progress) if task.progress.isdigit() else 0, created_at=int(task.created_at),
        completed_at=int(task.finished_at) if task.finished_at is not None and not failed else None,
        video_url=res.video_url, thumbnail_url=res.thumbnail_url, duration=res.duration,
        seconds=str(res.duration if res.duration is not None else req.seconds), size=req.size or DEFAULT_SIZE,
        prompt=req.prompt, failure_reason=reason,
        error=VideoError(code="video_generation_failed", message=reason) if reason else None)


@endpoint(FAMILY)
@documented("Create a video", request=CreateBody, response=VideoOut, media_type=(JSON, MULTIPART))
async def create(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    body = v.parse_body(await read_json_body(request), request.headers.get("content-type"))
    text = v.prompt(body.prompt)
    secs = v.seconds(body.seconds)
    size = v.size(body.size)
    aspect = v.aspect_ratio(body.aspect_ratio)
    v.n(body.n)
    ref = v.reference(body.input_reference)
    candidates = _candidates(gw, principal, body.model, secs)
    engine = engine_of(gw)
    rid = request_id(request)
    record = Stored(prompt=text, seconds=secs, size=size or "")
    new = NewTask(family=FAMILY, action="generate", status="queued", route=PREFIX,
                  request_json=_encode.encode(record).decode(), task_id=f"video_{secrets.token_hex(16)}")

    async def send(candidate: Candidate) -> Submitted:
        up = UpstreamBody(model=candidate.target.upstream_model, prompt=text, seconds=secs, size=size,
                          aspect_ratio=aspect, input_reference=ref)
        return await upstream.create(engine.http, candidate.target.upstream, up, rid)

    task = await engine.submit(principal, rid, new, candidates, send)
    return json_response(video_out(task))


@endpoint(FAMILY)
@documented("Retrieve a video", response=VideoOut)
async def retrieve(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    engine = engine_of(gw)
    task = await engine.fetch(principal, FAMILY, request.path_params["video_id"])
    return json_response(video_out(engine.shown(request, task)))
