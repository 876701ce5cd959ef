"""The three music endpoints of spec 4.12: submit (``{code, data: <task id>, message}``), fetch
one (``{code, data: <task>}``) and fetch many (CONTRACT 3b: ``{code, data: [<task>...]}``, only the
caller's tasks). A continuation names a clip of one of the caller's tasks and runs where that task
ran."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    Gateway,
    InvalidRequest,
    NotFound,
    UpstreamError,
    decode_body,
    documented,
    endpoint,
    get_gateway,
    json_response,
    read_json_body,
    request_id,
)
from gateway.api.accounts import Principal, unit_cost
from gateway.api.relay import Target
from gateway.api.tasks import Candidate, NewTask, Submitted, TaskEngine, TaskRecord, engine_of
from translators.music import upstream
from translators.music import validation as v
from translators.music.render import parse_clip_id, task_out, upstream_clips
from translators.music.wire import (
    FetchManyBody,
    FetchManyOut,
    FetchOut,
    Stored,
    SubmitBody,
    SubmitOut,
    UpstreamBody,
)

FAMILY = "music"
MAX_IDS = 500
_encode = msgspec.json.Encoder()


def routes() -> list[BaseRoute]:
    return [
        Route("/music/submit/music", submit, methods=["POST"]),
        Route("/music/fetch/{task_id}", fetch, methods=["GET"]),
        Route("/music/fetch", fetch_many, methods=["POST"]),
    ]


def _targets(gw: Gateway, engine: TaskEngine, model: str | None) -> tuple[str, list[Target]]:
    """The model (the first model of the first music upstream when none is asked for) and the
    music upstreams that serve it."""
    if model is None:
        firsts = engine.upstream_targets(upstream.PROTOCOL)
        if not firsts:
            raise UpstreamError("No upstream is configured for music tasks.")
        model = engine.first_model(firsts[0])
    targets = [t for t in gw.upstreams.targets(model, capability="task") if t.protocol == upstream.PROTOCOL]
    return model, targets


def _candidates(gw: Gateway, principal: Principal, model: str, targets: list[Target]) -> list[Candidate]:
    gw.catalogue.check(principal, model)
    if not targets:
        raise v.bad("model", f"`{model}` is not a music model")
    price = unit_cost(gw.catalogue.prices(model).per_task, 1, gw.catalogue.ratio(principal.user.group))
    return [Candidate(t, model, price) for t in targets]


async def _parent_clip(engine: TaskEngine, principal: Principal, clip: str,
                       at: float) -> tuple[TaskRecord, str]:
    """The caller's task holding clip ``clip``, and the upstream's id of that clip."""
    parsed = parse_clip_id(clip)
    if parsed is None:
        raise NotFound(f"The clip `{clip}` does not exist.", code="clip_not_found")
    task_id, index = parsed
    try:
        parent = await engine.get_owned(principal, FAMILY, task_id)
    except NotFound as exc:
        raise NotFound(f"The clip `{clip}` does not exist.", code="clip_not_found") from exc
    clips = upstream_clips(parent)
    if index >= len(clips):
        raise NotFound(f"The clip `{clip}` does not exist.", code="clip_not_found")
    if parent.status != "SUCCESS":
        raise v.bad("continue_clip_id", f"the clip's task has not finished (status {parent.status})")
    if clips[index].duration and at > clips[index].duration:
        raise v.bad("continue_at", f"the clip lasts {clips[index].duration:g} s")
    return parent, clips[index].id


@endpoint(FAMILY)
@documented("Submit a music task", request=SubmitBody, response=SubmitOut)
async def submit(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    body = v.check(decode_body(await read_json_body(request), SubmitBody))
    engine = engine_of(gw)
    up_clip: str | None = None
    model = body.model
    if body.continue_clip_id is not None and body.continue_at is not None:
        parent, up_clip = await _parent_clip(engine, principal, body.continue_clip_id, body.continue_at)
        model = model or parent.model
        model, targets = _targets(gw, engine, model)
        targets = [t for t in targets if t.name == parent.upstream]
        if not targets:
            raise InvalidRequest(f"The clip `{body.continue_clip_id}` can only be continued with the model "
                                 f"`{parent.model}`.", param="model")
    else:
        model, targets = _targets(gw, engine, model)
    candidates = _candidates(gw, principal, model, targets)
    rid = request_id(request)
    record = Stored(prompt=body.prompt, title=body.title or "", parent_clip=body.continue_clip_id)
    new = NewTask(family=FAMILY, action="CONTINUE" if up_clip else "MUSIC", status="PENDING",
                  route="/music/submit/music", request_json=_encode.encode(record).decode(),
                  notify_hook=body.notify_hook, hook_param="notify_hook")

    async def send(candidate: Candidate) -> Submitted:
        up = UpstreamBody(prompt=body.prompt, model=candidate.target.upstream_model, tags=body.tags,
                          title=body.title, lyric=body.lyric, make_instrumental=body.make_instrumental,
                          continue_at=body.continue_at, continue_clip_id=up_clip)
        return await upstream.submit(engine.http, candidate.target.upstream, up, rid)

    task = await engine.submit(principal, rid, new, candidates, send)
    return json_response(SubmitOut(code="success", data=task.task_id, message=""))


@endpoint(FAMILY)
@documented("Fetch a task", response=FetchOut)
async def fetch(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    engine = engine_of(gw)
    task = await engine.fetch(principal, FAMILY, request.path_params["task_id"])
    return json_response(FetchOut(code="success", data=task_out(engine.shown(request, task))))


@endpoint(FAMILY)
@documented("Fetch tasks by id", request=FetchManyBody, response=FetchManyOut)
async def fetch_many(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    body = decode_body(await read_json_body(request), FetchManyBody)
    if len(body.ids) > MAX_IDS:
        raise v.bad("ids", f"at most {MAX_IDS} ids")
    engine = engine_of(gw)
    tasks = await engine.fetch_many(principal, FAMILY, body.ids)
    shown = [task_out(engine.shown(request, t)) for t in tasks]
    return json_response(FetchManyOut(code="success", data=shown))
