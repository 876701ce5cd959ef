"""The three endpoints of video task A (spec 4.10): submit (``{taskId, credits}``), the status
object of spec 2.3, and the mp4 download. Every task is its owner's alone: another user's id is
404 on both reads."""

from __future__ import annotations

import asyncio

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    Gateway,
    NotFound,
    decode_body,
    documented,
    endpoint,
    get_gateway,
    json_response,
    read_json_body,
    request_id,
)
from gateway.api.accounts import Principal, nano_to_usd, unit_cost
from gateway.api.tasks import Candidate, NewTask, Submitted, TaskRecord, engine_of, relay
from translators.videoa import upstream
from translators.videoa import validation as v
from translators.videoa.family import SUBMIT_PATH
from translators.videoa.media import bad
from translators.videoa.wire import (
    CleanInput,
    Result,
    Stored,
    SubmitBody,
    SubmitOut,
    TaskData,
    TaskOut,
    UpstreamBody,
)

FAMILY = "videoa"
_THREAD_ABOVE = 1024 * 1024
_encode = msgspec.json.Encoder()
_result = msgspec.json.Decoder(Result)


def routes() -> list[BaseRoute]:
    return [
        Route(SUBMIT_PATH, submit, methods=["POST"]),
        Route("/videoa/v1/tasks/{task_id}", status, methods=["GET"]),
        Route("/videoa/v1/videos/generations/{task_id}.mp4", download, methods=["GET"]),
    ]


def _candidates(gw: Gateway, principal: Principal, model: str, seconds: int) -> list[Candidate]:
    """The ``videoa`` upstreams of ``model``, each priced ``per_second`` x ``seconds`` with the
    caller's group ratio (what is held at submit)."""
    gw.catalogue.check(principal, model)
    ratio = gw.catalogue.ratio(principal.user.group)
    price = unit_cost(gw.catalogue.prices(model).per_second, seconds, ratio)
    targets = [t for t in gw.upstreams.targets(model, capability="task") if t.protocol == upstream.PROTOCOL]
    if not targets:
        raise bad("model", f"`{model}` is not served by a video-task upstream")
    return [Candidate(t, model, price) for t in targets]


def _parse(raw: bytes) -> tuple[str, CleanInput]:
    body = decode_body(raw, SubmitBody)
    model = v.model(body.model)
    return model, v.clean_input(body.input, model)


@endpoint(FAMILY)
@documented("Submit a video task", request=SubmitBody, response=SubmitOut)
async def submit(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    raw = await read_json_body(request)
    # Decoding the body and reading inline media's durations is CPU work in proportion to its
    # size (up to 200 MB): a big body is checked off the event loop.
    model, clean = await asyncio.to_thread(_parse, raw) if len(raw) > _THREAD_ABOVE else _parse(raw)
    candidates = _candidates(gw, principal, model, clean.duration)
    engine = engine_of(gw)
    rid = request_id(request)
    record = Stored(generation_type=clean.generation_type, duration=clean.duration,
                    resolution=clean.resolution)
    new = NewTask(family=FAMILY, action=clean.generation_type, status="queued", route=SUBMIT_PATH,
                  request_json=_encode.encode(record).decode())

    async def send(candidate: Candidate) -> Submitted:
        up_body = UpstreamBody(model=candidate.target.upstream_model, input=clean)
        return await upstream.submit(engine.http, candidate.target.upstream, up_body, rid)

    task = await engine.submit(principal, rid, new, candidates, send)
    return json_response(SubmitOut(taskId=task.task_id, credits=nano_to_usd(task.reserved_nano)))


def download_url(request: Request, task: TaskRecord) -> str:
    return str(request.base_url).rstrip("/") + f"/videoa/v1/videos/generations/{task.task_id}.mp4"


def task_out(request: Request, task: TaskRecord) -> TaskOut:
    """Spec 2.3. ``credits``: the amount held while ``reserved``, the actual charge once
    ``charged``, 0 once ``refunded`` (USD). ``data.results`` are the gateway's own download links
    (the upstream's links need its credential and would reveal its ids)."""
    billing = task.billing_status
    credits = task.reserved_nano if billing == "reserved" else task.charged_nano
    out = TaskOut(id=task.task_id, status=task.status, created_at=int(task.created_at), model=task.model,
                  billing_status=billing, credits=nano_to_usd(credits))
    if task.status == "failed":
        out.failed_reason = task.fail_reason or "the task failed"
    elif task.status == "completed":
        result = _result.decode(task.result_json) if task.result_json else Result()
        out.data = TaskData(results=[download_url(request, task)], processing_time=result.processing_time)
    return out


@endpoint(FAMILY)
@documented("A task's status", response=TaskOut)
async def status(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    task = await engine_of(gw).fetch(principal, FAMILY, request.path_params["task_id"])
    return json_response(task_out(request, task))


@endpoint(FAMILY)
@documented("Download a finished task's video (mp4)")
async def download(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    task = await engine_of(gw).fetch(principal, FAMILY, request.path_params["task_id"])
    if task.status != "completed":
        raise NotFound(f"The video of task `{task.task_id}` is not ready (status `{task.status}`).",
                       code="video_not_ready")
    return await relay(engine_of(gw), request, task, "video")

