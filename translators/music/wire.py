"""The Structs of music tasks (a Suno style API, spec 2.5 and 4.12): the client's bodies, the
answers, the upstream's views (the same API: CONTRACT 3) and what a task keeps."""

from __future__ import annotations

import msgspec


class SubmitBody(msgspec.Struct, forbid_unknown_fields=True):
    prompt: str
    tags: str | None = None
    title: str | None = None
    lyric: str | None = None
    model: str | None = None
    make_instrumental: bool | None = None
    continue_at: float | None = None
    continue_clip_id: str | None = None
    notify_hook: str | None = None


class UpstreamBody(msgspec.Struct, omit_defaults=True):
    """What goes upstream: the client's fields, the upstream's own model and clip ids, no hook."""

    prompt: str
    model: str
    tags: str | None = None
    title: str | None = None
    lyric: str | None = None
    make_instrumental: bool | None = None
    continue_at: float | None = None
    continue_clip_id: str | None = None


class FetchManyBody(msgspec.Struct, forbid_unknown_fields=True):
    ids: list[str]


class SubmitOut(msgspec.Struct):
    code: str
    data: str
    message: str


class Clip(msgspec.Struct, omit_defaults=True):
    """Spec 2.5's clip; the optional fields are left out when the upstream gave none."""

    id: str
    title: str
    audio_url: str
    duration: float
    video_url: str | None = None
    image_url: str | None = None
    lyric: str | None = None
    tags: str | None = None
    model_name: str | None = None


class TaskOut(msgspec.Struct, omit_defaults=True):
    task_id: str
    action: str
    status: str
    progress: int
    clips: list[Clip]
    submit_time: int
    start_time: int | None = None
    finish_time: int | None = None
    failure_reason: str | None = None


class FetchOut(msgspec.Struct):
    code: str
    data: TaskOut


class FetchManyOut(msgspec.Struct):
    code: str
    data: list[TaskOut]


class Stored(msgspec.Struct, omit_defaults=True):
    prompt: str = ""
    title: str = ""
    parent_clip: str | None = None  # the gateway's id of the clip continued


class Result(msgspec.Struct):
    """The clips as the upstream last showed them, with the upstream's clip ids (never shown:
    the client sees ``<task id>_<n>``, which a continuation maps back)."""

    clips: list[Clip] = []


# --- the upstream's answers ------------------------------------------------------------------------

class UpstreamTask(msgspec.Struct):
    task_id: str
    status: str
    progress: int | None = None
    clips: list[Clip] = []
    failure_reason: str | None = None


class UpstreamSubmitted(msgspec.Struct):
    code: str
    data: str | None = None
    message: str = ""


class UpstreamFetched(msgspec.Struct):
    code: str
    data: list[UpstreamTask] = []
