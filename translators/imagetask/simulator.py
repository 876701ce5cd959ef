"""The simulator's image-task upstream: the same task API the gateway exposes (CONTRACT 3), with
tasks that advance with time, so ``make run`` shows the whole flow offline.

Behaviour options, read from the upstream credential (pieces split on ``-``, e.g. key
``sk-sim-dur300-steps3``) and from ``sim:<option>`` words in a prompt (``a cat sim:taskfail``):

* ``dur<MS>``    how long a task runs (default 6000 ms): SUBMITTED for its first tenth, then
                 IN_PROGRESS with a progress that moves in ``steps`` steps, then finished;
* ``steps<N>``   progress steps (default 4);
* ``taskfail``   the task ends in FAILURE (with a ``failReason``) instead of SUCCESS;
* ``forget``     the upstream forgets the task half-way (list-by-condition leaves it out, fetch 404);
* ``reject``     the submission is refused (code 4 at HTTP 200, as this API does).

A finished task's ``imageUrl`` serves a small PNG (a solid 4x4 image, its colour from the name).

The common fault options of every side (``fail503``, ``hang``, ``ttft<MS>``...) apply as well.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import struct
import time
import uuid
import zlib
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

_STEPS = re.compile(r"^steps(\d+)$")
KINDS = ("imagine", "change", "blend", "describe", "zoom", "pan", "modal")
_DESCRIPTIONS = ("1\ufe0f\u20e3 a small square of colour, flat light --ar 1:1\n\n"
                 "2\ufe0f\u20e3 a minimalist swatch on a plain background --ar 1:1\n\n"
                 "3\ufe0f\u20e3 an abstract single-tone texture --ar 1:1\n\n"
                 "4\ufe0f\u20e3 a tiny pixel study, macro view --ar 1:1")
_ACTIONS = {"imagine": "IMAGINE", "blend": "BLEND", "describe": "DESCRIBE", "zoom": "ZOOM", "pan": "PAN",
            "modal": "MODAL"}


class ImagetaskSide(SimVendor):
    name = "imagetask"

    def error_body(self, status: int, message: str) -> Any:
        return {"error": {"message": message, "type": "simulator_error", "code": status}}


SIDE = ImagetaskSide()


@dataclass
class Options(TaskOptions):
    duration_s: float = 6.0
    steps: int = 4

    def apply_word(self, word: str) -> None:
        if match := _STEPS.match(word):
            self.steps = max(int(match.group(1)), 1)


@dataclass
class SimTask:
    id: str
    action: str
    prompt: str
    options: Options
    submitted: float = field(default_factory=time.time)
    # Like a CDN object name and a chat message id: unrelated to the task id.
    image: str = field(default_factory=lambda: uuid.uuid4().hex)
    message: str = field(default_factory=lambda: str(uuid.uuid4().int)[:19])
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def known(self) -> bool:
        return not (self.options.forget and self.elapsed() >= self.options.duration_s / 2)

    def view(self, base_url: str) -> dict[str, Any]:
        o, t = self.options, self.elapsed()
        progress, start, finish, fail = "0%", None, None, None
        if t < o.duration_s * 0.1:
            status = "SUBMITTED"
        elif t < o.duration_s:
            status = "IN_PROGRESS"
            step = int((t / o.duration_s) * o.steps)
            progress = f"{min(step * 100 // o.steps, 99)}%"
            start = int((self.submitted + o.duration_s * 0.1) * 1000)
        else:
            status = "FAILURE" if o.fail else "SUCCESS"
            progress = "100%" if not o.fail else progress
            start = int((self.submitted + o.duration_s * 0.1) * 1000)
            finish = int((self.submitted + o.duration_s) * 1000)
            fail = "simulated failure: the image could not be generated" if o.fail else None
        done = status == "SUCCESS"
        return {
            "id": self.id, "action": self.action, "status": status, "progress": progress,
            "prompt": self.prompt, "promptEn": self.prompt,
            "description": "/imagine " + self.prompt if self.action == "IMAGINE" else self.action.lower(),
            "submitTime": int(self.submitted * 1000), "startTime": start, "finishTime": finish,
            "imageUrl": f"{base_url}/imagetask/image/{self.image}.png" if done else "",
            "failReason": fail,
            "properties": {"finalPrompt": self.prompt, "messageId": self.message,
                           "channelId": "sim-channel"},
            "buttons": [{"customId": f"SIM::JOB::upsample::{i}::{self.id}", "emoji": "", "label": f"U{i}",
                         "style": 2, "type": 2} for i in range(1, 5)] if done else [],
        }


TASKS_KEY = web.AppKey("imagetask_sim_tasks", dict[str, SimTask])
_ids = itertools.count(1)


def _tasks(app: web.Application) -> dict[str, SimTask]:
    return app[TASKS_KEY]


def _options(ctx: Ctx, prompt: str) -> Options:
    options = Options()
    options.apply(option_words(SIDE, ctx.request, prompt))
    return options


def _base_url(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


def _str(body: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = body.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadRequest(f"{name}: a non-empty string is required")
    return value


async def submit(ctx: Ctx) -> web.StreamResponse:
    kind = ctx.request.match_info["kind"]
    if kind not in KINDS:
        return ctx.error(404, f"unknown submit kind {kind}")
    body, tasks = ctx.body, _tasks(ctx.request.app)
    action = _ACTIONS.get(kind, "")
    prompt = ""
    if kind == "imagine":
        prompt = _str(body, "prompt")
    elif kind == "blend":
        images = body.get("base64Array")
        if not isinstance(images, list) or len(images) < 2:
            raise BadRequest("base64Array: at least two images are required")
    elif kind == "describe":
        _str(body, "base64")
        prompt = _DESCRIPTIONS  # a describe's answer is its prompts, as in the real API
    else:
        parent = tasks.get(_str(body, "taskId"))
        if parent is None or not parent.known():
            return json_response({"code": 3, "description": "task not found", "result": None})
        prompt = _str(body, "prompt", required=False) or parent.prompt
        if kind == "change":
            action = _str(body, "action").upper()
            if action not in ("UPSCALE", "VARIATION", "REROLL"):
                raise BadRequest("action: UPSCALE, VARIATION or REROLL")
    if "notifyHook" in body or "state" in body:
        raise BadRequest("the simulator upstream takes no notifyHook or state (the gateway keeps them)")
    options = _options(ctx, prompt)
    if options.reject:
        return json_response({"code": 4, "description": "banned prompt (simulated)", "result": None})
    task = SimTask(id=f"{int(time.time())}{next(_ids):06d}", action=action, prompt=prompt, options=options)
    tasks[task.id] = task
    return await ctx.respond({"code": 1, "description": "Submit success", "result": task.id,
                              "properties": {}})


async def list_by_condition(ctx: Ctx) -> web.StreamResponse:
    ids = ctx.body.get("ids")
    if not isinstance(ids, list):
        raise BadRequest("ids: an array of task ids is required")
    tasks = _tasks(ctx.request.app)
    base = _base_url(ctx.request)
    found = [tasks[i].view(base) for i in ids if isinstance(i, str) and i in tasks and tasks[i].known()]
    return await ctx.respond(found)


async def fetch(ctx: Ctx) -> web.StreamResponse:
    task = _tasks(ctx.request.app).get(ctx.request.match_info["task_id"])
    if task is None or not task.known():
        return ctx.error(404, "task not found")
    return await ctx.respond(task.view(_base_url(ctx.request)))


def png(name: str) -> bytes:
    """A valid 4x4 RGB PNG of one colour, chosen by ``name``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    colour = hashlib.sha256(name.encode()).digest()[:3]
    rows = b"".join(b"\x00" + colour * 4 for _ in range(4))
    header = struct.pack(">IIBBBBB", 4, 4, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


async def image(request: web.Request) -> web.StreamResponse:
    """A finished task's image at its public link (like a CDN's)."""
    name = request.match_info["name"]
    if not any(t.image == name for t in _tasks(request.app).values()):
        raise web.HTTPNotFound()
    return web.Response(body=png(name), content_type="image/png")


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    app[TASKS_KEY] = {}
    app.router.add_get("/imagetask/image/{name}.png", image)
    add_route(app, "POST", "/imagetask/submit/{kind}", endpoint(SIDE, submit))
    add_route(app, "POST", "/imagetask/task/list-by-condition", endpoint(SIDE, list_by_condition))
    add_route(app, "GET", "/imagetask/task/{task_id}/fetch", endpoint(SIDE, fetch))
