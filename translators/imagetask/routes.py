"""The nine image-task endpoints of spec 4.9. Submissions answer with the Midjourney-proxy shape
of CONTRACT 3b (``{code, description, result, properties}``, ``result`` the gateway's task id);
reads answer task objects of spec 2.2. Every task is its owner's alone: another user's id is 404
and list-by-condition leaves it out."""

from __future__ import annotations

import secrets
import time

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    Gateway,
    ModelNotAllowed,
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
from gateway.api.tasks import Candidate, NewTask, Submitted, TaskEngine, TaskRecord, engine_of
from translators.imagetask import upstream
from translators.imagetask import validation as v
from translators.imagetask.actions import CHANGE_ACTIONS, DIRECTIONS, FollowUp, check_parent, parse_custom_id
from translators.imagetask.render import stored, task_out
from translators.imagetask.wire import (
    BlendBody,
    ChangeBody,
    DescribeBody,
    Hooked,
    ImagineBody,
    ListBody,
    ModalBody,
    PanBody,
    Stored,
    SubmitOut,
    TaskOut,
    UpstreamSubmit,
    ZoomBody,
)

FAMILY = "imagetask"
MAX_LIST = 500
_encode = msgspec.json.Encoder()


def routes() -> list[BaseRoute]:
    post = ["POST"]
    return [
        Route("/imagetask/submit/imagine", imagine, methods=post),
        Route("/imagetask/submit/change", change, methods=post),
        Route("/imagetask/submit/blend", blend, methods=post),
        Route("/imagetask/submit/describe", describe, methods=post),
        Route("/imagetask/submit/zoom", zoom, methods=post),
        Route("/imagetask/submit/pan", pan, methods=post),
        Route("/imagetask/submit/modal", modal, methods=post),
        Route("/imagetask/task/{task_id}/fetch", fetch, methods=["GET"]),
        Route("/imagetask/task/list-by-condition", list_by_condition, methods=post),
    ]


def _new_id() -> str:
    """Numeric, like the task ids of this API (milliseconds then six random digits)."""
    return f"{int(time.time() * 1000)}{secrets.randbelow(10**6):06d}"


def _candidates(gw: Gateway, engine: TaskEngine, principal: Principal,
                parent: TaskRecord | None) -> list[Candidate]:
    """The image-task upstreams (a follow-up: only its task's), each priced ``per_task`` at its
    first model (CONTRACT 3b) with the caller's group ratio; those the key may not use left out."""
    targets = engine.upstream_targets(upstream.PROTOCOL)
    if parent is not None:
        targets = [t for t in targets if t.name == parent.upstream]
        if not targets:
            raise UpstreamError(f"The upstream that ran task `{parent.task_id}` is no longer available.")
    out: list[Candidate] = []
    for target in targets:
        model = engine.first_model(target)
        if gw.catalogue.model(model) is None or not gw.catalogue.may_call(principal, model):
            continue
        price = unit_cost(gw.catalogue.prices(model).per_task, 1, gw.catalogue.ratio(principal.user.group))
        out.append(Candidate(target, model, price))
    if targets and not out:
        raise ModelNotAllowed("This API key is not allowed to use the image-task models.")
    return out


async def _submit(request: Request, principal: Principal, hooked: Hooked, *, action: str, kind: str,
                  record: Stored, body: UpstreamSubmit, parent: TaskRecord | None = None) -> Response:
    gw = get_gateway(request)
    engine = engine_of(gw)
    rid = request_id(request)
    new = NewTask(family=FAMILY, action=action, status="NOT_START", route=request.url.path,
                  request_json=_encode.encode(record).decode(), notify_hook=v.hook(hooked.notifyHook),
                  state=v.state(hooked.state), task_id=_new_id())
    candidates = _candidates(gw, engine, principal, parent)

    async def send(candidate: Candidate) -> Submitted:
        # A follow-up names the earlier task by the upstream's own id, which only goes upstream.
        up = body if parent is None else msgspec.structs.replace(body, taskId=parent.upstream_task_id)
        return await upstream.submit(engine.http, candidate.target.upstream, kind, up, rid)

    task = await engine.submit(principal, rid, new, candidates, send)
    queued = task.status == "NOT_START"
    description = "In queue" if queued else "Submit success"
    return json_response(SubmitOut(code=22 if queued else 1, description=description, result=task.task_id))


async def _caller(request: Request) -> tuple[Principal, bytes]:
    principal = await get_gateway(request).auth.authenticate(request, FAMILY)
    return principal, await read_json_body(request)


# --- new tasks -----------------------------------------------------------------------------------

@endpoint(FAMILY)
@documented("Submit an imagine task", request=ImagineBody, response=SubmitOut)
async def imagine(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, ImagineBody)
    text = v.prompt(body.prompt)
    up = UpstreamSubmit(prompt=text, base64Array=v.images(body.base64Array, "base64Array", least=0),
                        botType=v.choice(body.botType, "botType", v.BOT_TYPES))
    return await _submit(request, principal, body, action="IMAGINE", kind="imagine",
                         record=Stored(prompt=text), body=up)


@endpoint(FAMILY)
@documented("Submit a blend task", request=BlendBody, response=SubmitOut)
async def blend(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, BlendBody)
    images = v.images(body.base64Array, "base64Array", least=2)
    dims = v.choice(body.dimensions, "dimensions", v.DIMENSIONS) or "SQUARE"
    bot = v.choice(body.botType, "botType", v.BOT_TYPES)
    up = UpstreamSubmit(base64Array=images, dimensions=dims, botType=bot)
    return await _submit(request, principal, body, action="BLEND", kind="blend", record=Stored(detail=dims),
                         body=up)


@endpoint(FAMILY)
@documented("Submit a describe task", request=DescribeBody, response=SubmitOut)
async def describe(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, DescribeBody)
    image = v.image(body.base64, "base64")
    up = UpstreamSubmit(base64=image, botType=v.choice(body.botType, "botType", v.BOT_TYPES))
    return await _submit(request, principal, body, action="DESCRIBE", kind="describe", record=Stored(),
                         body=up)


# --- follow-ups on a finished task ---------------------------------------------------------------

async def _follow(request: Request, principal: Principal, hooked: Hooked, task_id: str, follow: FollowUp,
                  field: str, *, prompt: str = "", mask: str | None = None) -> Response:
    gw = get_gateway(request)
    v.hook(hooked.notifyHook)
    v.state(hooked.state)
    parent = await engine_of(gw).get_owned(principal, FAMILY, task_id)
    check_parent(parent)
    text = prompt or None
    if follow.action in CHANGE_ACTIONS:
        kind, up = "change", UpstreamSubmit(action=follow.action, index=follow.index or None)
    elif follow.action == "ZOOM":
        kind, up = "zoom", UpstreamSubmit(zoom=float(follow.detail), prompt=text)
    elif follow.action == "PAN":
        kind, up = "pan", UpstreamSubmit(direction=follow.detail, prompt=text)
    else:
        kind, up = "modal", UpstreamSubmit(maskBase64=mask, prompt=text)
    record = Stored(prompt=prompt or stored(parent).prompt, parent=parent.task_id, index=follow.index,
                    detail=follow.detail)
    return await _submit(request, principal, hooked, action=follow.action, kind=kind, record=record, body=up,
                         parent=parent)


@endpoint(FAMILY)
@documented("Submit a change of a finished task", request=ChangeBody, response=SubmitOut)
async def change(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, ChangeBody)
    task_id = v.task_id(body.taskId)
    if body.customId is not None:
        return await _follow(request, principal, body, task_id, parse_custom_id(body.customId, task_id),
                             "customId")
    action = v.choice(body.action, "action", CHANGE_ACTIONS)
    if action is None:
        raise v.bad("action", "one of UPSCALE, VARIATION, REROLL is required (or a button's customId)")
    follow = FollowUp(action, index=v.index(body.index, action))
    return await _follow(request, principal, body, task_id, follow, "action")


@endpoint(FAMILY)
@documented("Submit a zoom of a finished task", request=ZoomBody, response=SubmitOut)
async def zoom(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, ZoomBody)
    task_id = v.task_id(body.taskId)
    follow = FollowUp("ZOOM", detail=v.zoom(body.zoom))
    text = v.prompt(body.prompt, required=False)
    return await _follow(request, principal, body, task_id, follow, "taskId", prompt=text)


@endpoint(FAMILY)
@documented("Submit a pan of a finished task", request=PanBody, response=SubmitOut)
async def pan(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, PanBody)
    task_id = v.task_id(body.taskId)
    direction = v.choice(body.direction, "direction", DIRECTIONS)
    assert direction is not None
    text = v.prompt(body.prompt, required=False)
    return await _follow(request, principal, body, task_id, FollowUp("PAN", detail=direction), "taskId",
                         prompt=text)


@endpoint(FAMILY)
@documented("Submit a modal follow-up", request=ModalBody, response=SubmitOut)
async def modal(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, ModalBody)
    task_id = v.task_id(body.taskId)
    text = v.prompt(body.prompt, required=False)
    mask = v.image(body.maskBase64, "maskBase64") if body.maskBase64 is not None else None
    return await _follow(request, principal, body, task_id, FollowUp("MODAL"), "taskId", prompt=text,
                         mask=mask)


# --- reads ---------------------------------------------------------------------------------------

@endpoint(FAMILY)
@documented("Fetch a task", response=TaskOut)
async def fetch(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    engine = engine_of(gw)
    task = await engine.fetch(principal, FAMILY, request.path_params["task_id"])
    return json_response(task_out(engine.shown(request, task)))


@endpoint(FAMILY)
@documented("Fetch tasks by id", request=ListBody, response=list[TaskOut])
async def list_by_condition(request: Request) -> Response:
    principal, raw = await _caller(request)
    body = decode_body(raw, ListBody)
    if len(body.ids) > MAX_LIST:
        raise v.bad("ids", f"at most {MAX_LIST} ids")
    engine = engine_of(get_gateway(request))
    tasks = await engine.fetch_many(principal, FAMILY, body.ids)
    return json_response([task_out(engine.shown(request, t)) for t in tasks])
