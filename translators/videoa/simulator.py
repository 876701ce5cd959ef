"""The simulator's video-A upstream: the same task API the gateway exposes (CONTRACT 3), with tasks
that advance with time and an mp4 download that needs the upstream credential.

Options, read from the upstream credential (pieces split on ``-``, e.g. ``sk-sim-dur300``) and
from ``sim:<option>`` words in the prompt (``a storm at sea sim:taskfail``):

* ``dur<MS>``    how long a task runs (default 8000 ms): ``queued`` for its first tenth, then
                 ``generating``, then ``completed`` (or ``failed``);
* ``taskfail``   the task ends ``failed`` with a ``failed_reason``;
* ``forget``     the upstream forgets the task half-way (its status answers 404);
* ``reject``     the submission is refused with a 400;
* ``made<S>``    the finished task reports S seconds of video (default: the seconds asked for);
* ``redirect``   the mp4 answers 302 to a signed file link (served without the credential);
* ``kb<N>``      the mp4's size in KB (default 256);
* ``pace<MS>``   a pause before each 64 KB piece of the mp4 (a slow storage link);
* ``cutdl``      the mp4 transfer breaks off half-way (the connection is dropped).

The common fault options (``fail503``, ``hang``, ``ttft<MS>``...) apply as well.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import re
import struct
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway_simulator.toolkit import (
    BadRequest,
    Ctx,
    SimVendor,
    TaskOptions,
    add_route,
    endpoint,
    hookimpl,
    json_response,
    option_words,
)

_OPTION = re.compile(r"^(made|kb|pace)(\d+)$")
_SECRET = b"videoa-sim-file-signing"


class VideoaSide(SimVendor):
    name = "videoa"

    def error_body(self, status: int, message: str) -> Any:
        return {"error": {"message": message, "type": "simulator_error", "code": status}}


SIDE = VideoaSide()


@dataclass
class Options(TaskOptions):
    redirect: bool = False
    made_s: int | None = None
    size_kb: int = 256
    pace_s: float = 0.0
    cut_download: bool = False

    def apply_word(self, word: str) -> None:
        if match := _OPTION.match(word):
            value = int(match.group(2))
            if match.group(1) == "made":
                self.made_s = value
            elif match.group(1) == "pace":
                self.pace_s = value / 1000.0
            else:
                self.size_kb = max(value, 1)
        elif word == "redirect":
            self.redirect = True
        elif word == "cutdl":
            self.cut_download = True


@dataclass
class SimTask:
    id: str
    model: str
    seconds: int
    options: Options
    created: float = field(default_factory=time.time)
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def known(self) -> bool:
        return not (self.options.forget and self.elapsed() >= self.options.duration_s / 2)

    def status(self) -> str:
        o, t = self.options, self.elapsed()
        if t < o.duration_s * 0.1:
            return "queued"
        if t < o.duration_s:
            return "generating"
        return "failed" if o.fail else "completed"

    def view(self, base_url: str) -> dict[str, Any]:
        status = self.status()
        out: dict[str, Any] = {"id": self.id, "status": status, "created_at": int(self.created),
                               "model": self.model, "billing_status": "reserved", "credits": self.seconds}
        if status == "failed":
            out["billing_status"] = "refunded"
            out["failed_reason"] = "simulated failure: the video could not be generated"
        elif status == "completed":
            out["billing_status"] = "charged"
            made = self.options.made_s if self.options.made_s is not None else self.seconds
            out["data"] = {"results": [f"{base_url}/videoa/v1/videos/generations/{self.id}.mp4"],
                           "processing_time": round(self.options.duration_s, 3), "duration": made}
        return out


TASKS_KEY = web.AppKey("videoa_sim_tasks", dict[str, SimTask])
_ids = itertools.count(1)


def mp4_head(seconds: int) -> bytes:
    """An ``ftyp`` box and a ``moov`` with an ``mvhd`` telling ``seconds`` (timescale 1000)."""
    ftyp = struct.pack(">I4s4sI4s4s", 24, b"ftyp", b"isom", 512, b"isom", b"mp41")
    mvhd_body = struct.pack(">B3xIIII", 0, 0, 0, 1000, seconds * 1000) + b"\x00" * 80
    mvhd = struct.pack(">I4s", 8 + len(mvhd_body), b"mvhd") + mvhd_body
    moov = struct.pack(">I4s", 8 + len(mvhd), b"moov") + mvhd
    return ftyp + moov


def mp4_bytes(task: SimTask) -> tuple[int, AsyncIterator[bytes]]:
    """The file's size and its bytes in chunks (an ``mdat`` of a deterministic pattern)."""
    head = mp4_head(task.seconds)
    payload = task.options.size_kb * 1024
    mdat_head = struct.pack(">I4s", 8 + payload, b"mdat")
    pattern = hashlib.sha256(task.id.encode()).digest() * 2048  # 64 KB

    async def chunks() -> AsyncIterator[bytes]:
        yield head + mdat_head
        left = payload
        while left > 0:
            piece = pattern[:min(left, len(pattern))]
            left -= len(piece)
            yield piece

    return len(head) + len(mdat_head) + payload, chunks()


def _base_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _signature(task_id: str) -> str:
    return hashlib.sha256(_SECRET + task_id.encode()).hexdigest()[:32]


async def _stream(request: web.Request, task: SimTask) -> web.StreamResponse:
    size, chunks = mp4_bytes(task)
    resp = web.StreamResponse(headers={"Content-Type": "video/mp4", "Content-Length": str(size)})
    await resp.prepare(request)
    sent = 0
    async for chunk in chunks:
        if task.options.pace_s:
            await asyncio.sleep(task.options.pace_s)
        if task.options.cut_download and sent >= size // 2:
            assert request.transport is not None
            request.transport.close()  # mid-body: the client sees a truncated transfer
            return resp
        await resp.write(chunk)
        sent += len(chunk)
    await resp.write_eof()
    return resp


async def submit(ctx: Ctx) -> web.StreamResponse:
    body = ctx.body
    model = body["model"]
    data = body["input"]
    prompt = data["prompt"]
    if not isinstance(model, str) or not isinstance(prompt, str) or not prompt.strip():
        raise BadRequest("model and input.prompt are required")
    if "notify_hook" in body or "callback_url" in body:
        raise BadRequest("the simulator upstream takes no callback URL")
    options = Options()
    options.apply(option_words(SIDE, ctx.request, prompt))
    if options.reject:
        return ctx.error(400, "the prompt was rejected by the content filter (simulated)")
    seconds = int(data.get("duration", 5))
    task = SimTask(id=f"sim-va-{int(time.time())}-{next(_ids)}", model=model, seconds=seconds,
                   options=options)
    ctx.request.app[TASKS_KEY][task.id] = task
    return await ctx.respond({"taskId": task.id, "credits": seconds})


def _task(ctx: Ctx, task_id: str) -> SimTask | None:
    task = ctx.request.app[TASKS_KEY].get(task_id)
    return task if task is not None and task.known() else None


async def status(ctx: Ctx) -> web.StreamResponse:
    task = _task(ctx, ctx.request.match_info["task_id"])
    if task is None:
        return ctx.error(404, "task not found")
    return await ctx.respond(task.view(_base_url(ctx.request)))


async def video(ctx: Ctx) -> web.StreamResponse:
    task = _task(ctx, ctx.request.match_info["task_id"])
    if task is None or task.status() != "completed":
        return ctx.error(404, "no finished video for this task")
    if task.options.redirect:
        raise web.HTTPFound(f"/videoa/files/{task.id}.mp4?sig={_signature(task.id)}")
    return await _stream(ctx.request, task)


async def signed_file(request: web.Request) -> web.StreamResponse:
    """A signed file link, like a storage bucket's: no credential, the signature is the key."""
    task_id = request.match_info["task_id"]
    task = request.app[TASKS_KEY].get(task_id)
    if task is None or request.query.get("sig") != _signature(task_id):
        return json_response(SIDE.error_body(403, "bad signature"), status=403)
    return await _stream(request, task)


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    app[TASKS_KEY] = {}
    add_route(app, "POST", "/videoa/v1/videos/generations", endpoint(SIDE, submit))
    add_route(app, "GET", "/videoa/v1/tasks/{task_id}", endpoint(SIDE, status))
    add_route(app, "GET", "/videoa/v1/videos/generations/{task_id}.mp4", endpoint(SIDE, video))
    app.router.add_get("/videoa/files/{task_id}.mp4", signed_file)
