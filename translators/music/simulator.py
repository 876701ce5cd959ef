"""The simulator's music upstream (a Suno style API, CONTRACT 3), with tasks that move through the
statuses of spec 3.4 as time passes: ``PENDING`` (first tenth), ``TEXT_GENERATING`` (to 30%),
``FIRST_SUCCESS`` (to 60%: the first clip is streamable), ``STREAMING``, then ``SUCCESS`` with two
clips (a continuation: one clip that goes on from the continued one), or ``FAILURE``.

Options, read from the upstream credential (pieces split on ``-``) and from ``sim:<option>`` words
in the prompt: ``dur<MS>`` (default 8000 ms), ``taskfail`` (ends ``FAILURE``: "upstream
overloaded"), ``forget`` (forgotten half-way), ``reject`` (the submission is refused). Lyrics over
3000 characters end ``FAILURE`` with "lyrics too long", as the real service does. The common fault
options (``fail503``, ``hang``...) apply as well.
"""

from __future__ import annotations

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

MAX_LYRIC = 3000
_FILE_BYTES = 32 * 1024
_STAGES = ((0.1, "PENDING"), (0.3, "TEXT_GENERATING"), (0.6, "FIRST_SUCCESS"), (1.0, "STREAMING"))


class MusicSide(SimVendor):
    name = "music"

    def error_body(self, status: int, message: str) -> Any:
        return {"code": "error", "message": message, "data": None}


SIDE = MusicSide()


class Options(TaskOptions):
    """Only the common task options."""


@dataclass
class SimSong:
    id: str
    body: dict[str, Any]
    options: Options
    clip_ids: tuple[str, str] = field(default_factory=lambda: (secrets.token_hex(8), secrets.token_hex(8)))
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def known(self) -> bool:
        return not (self.options.forget and self.elapsed() >= self.options.duration_s / 2)

    def _clip(self, base: str, n: int, streaming: bool) -> dict[str, Any]:
        b = self.body
        title = str(b.get("title") or "Untitled")
        clip: dict[str, Any] = {"id": self.clip_ids[n], "title": title,
                                "audio_url": f"{base}/music/files/{self.clip_ids[n]}.mp3",
                                "duration": 0 if streaming else 120.5 + n * 10}
        if n == 0:  # the full record; the second clip carries only the short form
            clip.update(video_url=f"{base}/music/files/{self.clip_ids[n]}.mp4",
                        image_url=f"{base}/music/files/{self.clip_ids[n]}.jpg",
                        lyric="" if b.get("make_instrumental")
                        else str(b.get("lyric") or "[Verse]\nsimulated"),
                        tags=str(b.get("tags") or "pop"), model_name=str(b.get("model") or ""))
        return clip

    def view(self, base: str) -> dict[str, Any]:
        o, t = self.options, self.elapsed() / max(self.options.duration_s, 1e-6)
        status = next((s for edge, s in _STAGES if t < edge), "")
        out: dict[str, Any] = {"task_id": self.id, "progress": min(int(t * 100), 99), "clips": []}
        too_long = len(str(self.body.get("lyric") or "")) > MAX_LYRIC
        if status:
            out["status"] = status
            if status in ("FIRST_SUCCESS", "STREAMING"):
                out["clips"] = [self._clip(base, 0, streaming=True)]
        elif o.fail or too_long:
            reason = "lyrics too long" if too_long else "upstream overloaded"
            out.update(status="FAILURE", failure_reason=reason)
        else:
            count = 1 if self.body.get("continue_clip_id") else 2
            clips = [self._clip(base, n, False) for n in range(count)]
            out.update(status="SUCCESS", progress=100, clips=clips)
        return out


SONGS_KEY = web.AppKey("music_sim_songs", dict[str, SimSong])


def _base(request: web.Request) -> str:
    return f"{request.scheme}://{request.host}"


async def submit(ctx: Ctx) -> web.StreamResponse:
    body, songs = ctx.body, ctx.request.app[SONGS_KEY]
    prompt = body["prompt"]
    if not isinstance(prompt, str) or not prompt.strip():
        raise BadRequest("prompt: a non-empty string is required")
    if "notify_hook" in body:
        raise BadRequest("the simulator upstream takes no notify_hook (the gateway keeps it)")
    clip = body.get("continue_clip_id")
    if clip is not None and not any(clip in s.clip_ids for s in songs.values()):
        return ctx.error(400, f"continue_clip_id: no clip {clip}")
    options = Options()
    options.apply(option_words(SIDE, ctx.request, prompt))
    if options.reject:
        return await ctx.respond({"code": "error", "data": None, "message": "prompt rejected (simulated)"})
    song = SimSong(id=f"sim-music-{secrets.token_hex(8)}", body=body, options=options)
    songs[song.id] = song
    return await ctx.respond({"code": "success", "data": song.id, "message": ""})


async def fetch_one(ctx: Ctx) -> web.StreamResponse:
    song = ctx.request.app[SONGS_KEY].get(ctx.request.match_info["task_id"])
    if song is None or not song.known():
        return ctx.error(404, "task not found")
    return await ctx.respond({"code": "success", "data": song.view(_base(ctx.request))})


async def fetch_many(ctx: Ctx) -> web.StreamResponse:
    ids = ctx.body["ids"]
    if not isinstance(ids, list):
        raise BadRequest("ids: an array of task ids is required")
    songs, base = ctx.request.app[SONGS_KEY], _base(ctx.request)
    found = [songs[i].view(base) for i in ids if isinstance(i, str) and i in songs and songs[i].known()]
    return await ctx.respond({"code": "success", "data": found})


async def clip_file(request: web.Request) -> web.StreamResponse:
    """A clip's file at its public link (like a CDN's): deterministic filler bytes."""
    name, ext = request.match_info["name"], request.match_info["ext"]
    if not any(name in song.clip_ids for song in request.app[SONGS_KEY].values()):
        raise web.HTTPNotFound()
    kind = {"mp3": "audio/mpeg", "mp4": "video/mp4", "jpg": "image/jpeg"}[ext]
    return web.Response(body=(name.encode() * 4096)[:_FILE_BYTES], content_type=kind)


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    app[SONGS_KEY] = {}
    add_route(app, "POST", "/music/submit/music", endpoint(SIDE, submit))
    add_route(app, "GET", "/music/fetch/{task_id}", endpoint(SIDE, fetch_one))
    add_route(app, "POST", "/music/fetch", endpoint(SIDE, fetch_many))
    app.router.add_get("/music/files/{name}.{ext:mp3|mp4|jpg}", clip_file)
