"""The Structs of video task B (the OpenAI video API, spec 2.4 and 4.11): the client's body, the
video object it gets back, the upstream's answers (the same API: CONTRACT 3) and what a task keeps."""

from __future__ import annotations

import msgspec


class InputReference(msgspec.Struct, forbid_unknown_fields=True):
    """A reference image or video: a link (public http(s) or a data URL) or an uploaded file's id."""

    image_url: str | None = None
    video_url: str | None = None
    file_id: str | None = None


class CreateBody(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    prompt: str
    seconds: int | str | None = None  # the openai SDK sends "4"; spec 4.11 an integer
    size: str | None = None
    aspect_ratio: str | None = None
    n: int | None = None
    input_reference: InputReference | None = None


class UpstreamBody(msgspec.Struct, omit_defaults=True):
    model: str
    prompt: str
    seconds: int
    size: str | None = None
    aspect_ratio: str | None = None
    input_reference: InputReference | None = None


class VideoError(msgspec.Struct):
    code: str
    message: str


class VideoOut(msgspec.Struct):
    """Spec 2.4, with the OpenAI video object's own fields beside (``progress``, ``seconds`` as
    text, ``size``, ``error``) so the openai SDK reads it too."""

    id: str
    object: str
    model: str
    status: str
    progress: int
    created_at: int
    completed_at: int | None
    video_url: str | None
    thumbnail_url: str | None
    duration: int | None
    seconds: str
    size: str
    prompt: str
    failure_reason: str | None = None
    error: VideoError | None = None


class VideoList(msgspec.Struct):
    """The OpenAI cursor page of ``GET /v1/videos``."""

    object: str
    data: list[VideoOut]
    first_id: str | None
    last_id: str | None
    has_more: bool


class Stored(msgspec.Struct, omit_defaults=True):
    prompt: str = ""
    seconds: int = 0
    size: str = ""


class Result(msgspec.Struct, omit_defaults=True):
    video_url: str | None = None
    thumbnail_url: str | None = None
    duration: int | None = None


# --- the upstream's answers ------------------------------------------------------------------------

class UpstreamVideo(msgspec.Struct):
    id: str
    status: str
    progress: int | None = None
    video_url: str | None = None
    thumbnail_url: str | None = None
    duration: float | None = None
    failure_reason: str | None = None
