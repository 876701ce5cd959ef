"""The simulator's video-B upstream (``POST /v1/videos``, ``GET /v1/videos/<id>``), with videos
that advance with time, and their files at public (unguessable) links.

Options, read from the upstream credential (pieces split on ``-``) and from ``sim:<option>`` words
in the prompt: ``dur<MS>`` (how long a video takes, default 8000 ms: ``queued`` for the first
tenth, then ``processing`` with a progress), ``taskfail`` (ends ``failed`` with a
``failure_reason``), ``forget`` (forgotten half-way: retrieve answers 404), ``reject`` (the create
is refused with a 400), ``made<S>`` (reports S seconds made; default the seconds asked for),
``kb<N>`` (the video file's size in KB, default 64: made as it is sent, never held, so a 200 MB
file costs nothing), ``offsite`` (the result links name ``localhost`` instead of the address the
upstream was asked on: another origin, on a private address; ``offsiteip``: ``127.0.0.2``, an IP
literal), ``nolinks`` (as the OpenAI API: no
links in the video object; the files are at ``GET /v1/videos/<id>/content[?variant=thumbnail]``,
with the credential). Files answer ``Range`` requests with a 206. The common fault options
(``fail503``, ``hang``...) apply as well.
"""

from __future__ import annotations

import re
import secrets
import time
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
    option_words,
)

_OPTION = re.compile(r"^(made|kb)(\d+)$")
_THUMBNAIL_BYTES = 64 * 1024
_PIECE = 64 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_OFFSITE = {"offsite": "localhost", "offsiteip": "127.0.0.2"}


class VideosSide(SimVendor):
    name = "videos"

    def error_body(self, status: int, message: str) -> Any:
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


SIDE = VideosSide()


@dataclass
class Options(TaskOptions):
    made_s: int | None = None
    size_kb: int = 64
    offsite: str = ""  # the host result links name instead of the one the upstream was asked on
    nolinks: bool = False

    def apply_word(self, word: str) -> None:
        if match := _OPTION.match(word):
            if match.group(1) == "made":
                self.made_s = int(match.group(2))
            else:
                self.size_kb = max(int(match.group(2)), 1)
        elif word in _OFFSITE:
            self.offsite = _OFFSITE[word]
        elif word == "nolinks":
            self.nolinks = True


@dataclass
class SimVideo:
    id: str
    model: str
    seconds: int
    size: str
    options: Options
    file: str = field(default_factory=lambda: secrets.token_hex(12))  # a CDN object name
    created: float = field(default_factory=time.time)
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def view(self, base_url: str) -> dict[str, Any]:
        o, t = self.options, self.elapsed()
        files_url = base_url.replace("//127.0.0.1:", f"//{o.offsite}:", 1) if o.offsite else base_url
        out: dict[str, Any] = {"id": self.id, "object": "video.task", "model": self.model,
                               "created_at": int(self.created), "size": self.size,
                               "seconds": str(self.seconds), "progress": 0, "status": "queued"}
        if o.duration_s * 0.1 <= t < o.duration_s:
            out.update(status="processing", progress=min(int(t / o.duration_s * 100), 99))
        elif t >= o.duration_s and o.fail:
            out.update(status="failed", failure_reason="simulated failure: the video could not be rendered")
        elif t >= o.duration_s:
            made = o.made_s if o.made_s is not None else self.seconds
            out.update(status="completed", progress=100, completed_at=int(self.created + o.duration_s),
                       duration=made)
            if not o.nolinks:
                out.update(video_url=f"{files_url}/v1/videos/files/{self.file}.mp4",
                           thumbnail_url=f"{files_url}/v1/videos/files/{self.file}.jpg")
        return out


VIDEOS_KEY = web.AppKey("videos_sim_videos", dict[str, SimVideo])


async def create(ctx: Ctx) -> web.StreamResponse:
    body = ctx.body
    prompt, model = body["prompt"], body["model"]
    if not isinstance(prompt, str) or not prompt.strip() or not isinstance(model, str):
        raise BadRequest("model and prompt are required")
    options = Options()
    options.apply(option_words(SIDE, ctx.request, prompt))
    if options.reject:
        return ctx.error(400, "the prompt was rejected by the moderation system (simulated)")
    video = SimVideo(id=f"video_sim_{secrets.token_hex(8)}", model=model, seconds=int(body.get("seconds", 4)),
                     size=str(body.get("size") or "1280x720"), options=options)
    ctx.request.app[VIDEOS_KEY][video.id] = video
    return await ctx.respond(video.view(f"{ctx.request.scheme}://{ctx.request.host}"))


async def retrieve(ctx: Ctx) -> web.StreamResponse:
    video = ctx.request.app[VIDEOS_KEY].get(ctx.request.match_info["video_id"])
    if video is None or (video.options.forget and video.elapsed() >= video.options.duration_s / 2):
        return ctx.error(404, "video not found")
    return await ctx.respond(video.view(f"{ctx.request.scheme}://{ctx.request.host}"))


def file_bytes(name: str, start: int, end: int) -> bytes:
    """Bytes ``start`` to ``end`` (exclusive) of a file named ``name``: its name repeated, so any
    range can be made (and checked) without the whole file."""
    unit = name.encode()
    first = start // len(unit)
    repeated = unit * ((end - first * len(unit)) // len(unit) + 1)
    return repeated[start - first * len(unit):end - first * len(unit)]


def _range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of a single ``bytes=`` range; None for the whole file."""
    match = _RANGE.match(header or "")
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if first == "":
        return max(size - int(last), 0), size
    return int(first), min(int(last) + 1, size) if last else size


async def file(request: web.Request) -> web.StreamResponse:
    """A result file at its public link (like a CDN's): deterministic filler bytes, made piece by
    piece as they are sent; a ``Range`` is answered with a 206 (or a 416 past the end)."""
    name, ext = request.match_info["name"], request.match_info["ext"]
    video = next((v for v in request.app[VIDEOS_KEY].values() if v.file == name), None)
    if video is None:
        raise web.HTTPNotFound()
    return await send_file(request, video, ext)


async def content(ctx: Ctx) -> web.StreamResponse:
    """The OpenAI API's download of a finished video (``variant=thumbnail``: its thumbnail)."""
    video = ctx.request.app[VIDEOS_KEY].get(ctx.request.match_info["video_id"])
    if video is None or video.view("")["status"] != "completed":
        return ctx.error(404, "video not found or not completed")
    variant = ctx.request.query.get("variant", "video")
    if variant not in ("video", "thumbnail"):
        return ctx.error(400, f"unknown variant {variant}")
    return await send_file(ctx.request, video, "mp4" if variant == "video" else "jpg")


async def send_file(request: web.Request, video: SimVideo, ext: str) -> web.StreamResponse:
    name = video.file
    size = video.options.size_kb * 1024 if ext == "mp4" else _THUMBNAIL_BYTES
    headers = {"Content-Type": "video/mp4" if ext == "mp4" else "image/jpeg", "Accept-Ranges": "bytes"}
    start, end = 0, size
    if (asked := _range(request.headers.get("Range"), size)) is not None:
        start, end = asked
        if start >= end:
            raise web.HTTPRequestRangeNotSatisfiable(headers={"Content-Range": f"bytes */{size}"})
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
    headers["Content-Length"] = str(end - start)
    resp = web.StreamResponse(status=206 if asked else 200, headers=headers)
    await resp.prepare(request)
    for at in range(start, end, _PIECE):
        await resp.write(file_bytes(name, at, min(at + _PIECE, end)))
    await resp.write_eof()
    return resp


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    app[VIDEOS_KEY] = {}
    add_route(app, "POST", "/v1/videos", endpoint(SIDE, create))
    add_route(app, "GET", "/v1/videos/{video_id}", endpoint(SIDE, retrieve))
    add_route(app, "GET", "/v1/videos/{video_id}/content", endpoint(SIDE, content))
    app.router.add_get("/v1/videos/files/{name}.{ext:mp4|jpg}", file)
