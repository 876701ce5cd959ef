"""The Structs of video task A: the client's body, its answers (spec 2.3), the upstream's answers
(the same API: CONTRACT 3) and what a task keeps in storage."""

from __future__ import annotations

import msgspec


class Input(msgspec.Struct, forbid_unknown_fields=True):
    prompt: str | None = None
    generation_type: str | None = None
    image_urls: list[str] | None = None
    video_urls: list[str] | None = None
    audio_urls: list[str] | None = None
    duration: int | None = None
    aspect_ratio: str | None = None
    resolution: str | None = None
    generate_audio: bool | None = None
    negative_prompt: str | None = None


class SubmitBody(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    input: Input


class CleanInput(msgspec.Struct, omit_defaults=True):
    """The validated input, defaults filled in: what goes upstream."""

    prompt: str
    generation_type: str
    duration: int
    aspect_ratio: str
    resolution: str
    generate_audio: bool
    image_urls: list[str] = []
    video_urls: list[str] = []
    audio_urls: list[str] = []
    negative_prompt: str | None = None


class UpstreamBody(msgspec.Struct):
    model: str
    input: CleanInput


class SubmitOut(msgspec.Struct):
    taskId: str
    credits: float


class TaskData(msgspec.Struct):
    results: list[str]
    processing_time: float


class TaskOut(msgspec.Struct, omit_defaults=True):
    id: str
    status: str
    created_at: int
    model: str
    billing_status: str
    credits: float
    failed_reason: str | None = None
    data: TaskData | None = None


class Stored(msgspec.Struct, omit_defaults=True):
    """The request as the task keeps it (never shown as is)."""

    generation_type: str = "text-to-video"
    duration: int = 5
    resolution: str = "720p"


class Result(msgspec.Struct, omit_defaults=True):
    """What a finished upstream task left: its result links (upstream links, never shown: the
    client downloads through the gateway), generation time and the video's seconds."""

    results: list[str] = []
    processing_time: float = 0.0
    seconds: float | None = None


# --- the upstream's answers ------------------------------------------------------------------------

class UpstreamSubmitted(msgspec.Struct):
    taskId: str


class UpstreamData(msgspec.Struct):
    results: list[str] = []
    processing_time: float = 0.0
    duration: float | None = None  # seconds of video made, when the upstream says


class UpstreamTask(msgspec.Struct):
    id: str
    status: str
    failed_reason: str | None = None
    data: UpstreamData | None = None
