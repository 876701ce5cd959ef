"""The image-task wire (a Midjourney-proxy style API), as msgspec Structs: client bodies, what the
gateway answers, what it reads from an upstream, and what it keeps in a task's JSON columns.

Client bodies are decoded with ``forbid_unknown_fields`` off (clients of this API send extra
fields such as ``accountFilter``); what the gateway forwards upstream is built from the fields it
knows, never the client's bytes.
"""

from __future__ import annotations

import msgspec

# --- client requests -----------------------------------------------------------------------------


class Hooked(msgspec.Struct, kw_only=True):
    notifyHook: str | None = None
    state: str | None = None
    botType: str | None = None


class ImagineBody(Hooked, kw_only=True):
    prompt: str
    base64Array: list[str] = []


class BlendBody(Hooked, kw_only=True):
    base64Array: list[str]
    dimensions: str | None = None  # PORTRAIT | SQUARE | LANDSCAPE


class DescribeBody(Hooked, kw_only=True):
    base64: str


class ChangeBody(Hooked, kw_only=True):
    taskId: str
    action: str | None = None  # UPSCALE | VARIATION | REROLL
    index: int | None = None  # 1-4, for UPSCALE and VARIATION
    customId: str | None = None  # a button of the earlier task, instead of action/index


class ZoomBody(Hooked, kw_only=True):
    taskId: str
    zoom: float = 2.0  # zoom-out factor, (1, 2]
    prompt: str | None = None


class PanBody(Hooked, kw_only=True):
    taskId: str
    direction: str  # LEFT | RIGHT | UP | DOWN
    prompt: str | None = None


class ModalBody(Hooked, kw_only=True):
    taskId: str
    prompt: str | None = None
    maskBase64: str | None = None  # region to repaint (vary region)


class ListBody(msgspec.Struct):
    ids: list[str]


# --- what the gateway answers --------------------------------------------------------------------


class SubmitOut(msgspec.Struct):
    code: int  # 1 submitted, 22 queued
    description: str
    result: str  # the gateway's task id
    properties: dict[str, str] = {}


class Button(msgspec.Struct):
    customId: str
    emoji: str
    label: str
    style: int
    type: int


class Properties(msgspec.Struct):
    finalPrompt: str
    messageId: str
    channelId: str


class TaskOut(msgspec.Struct):
    """Spec 2.2."""

    id: str
    action: str
    status: str
    progress: str
    prompt: str
    promptEn: str
    description: str
    submitTime: int
    startTime: int | None
    finishTime: int | None
    imageUrl: str
    failReason: str | None
    properties: Properties
    buttons: list[Button]
    state: str | None = None


class CallbackOut(msgspec.Struct):
    """Spec 6.1 (plus the progress and failure, which receivers of this API expect)."""

    id: str
    action: str
    status: str
    imageUrl: str
    state: str | None
    progress: str
    failReason: str | None


# --- the upstream --------------------------------------------------------------------------------


class UpstreamSubmit(msgspec.Struct, omit_defaults=True):
    """What the gateway sends to ``/imagetask/submit/<kind>`` upstream: the fields it validated,
    the upstream's own id in ``taskId``; never the client's ``notifyHook`` or ``state``."""

    prompt: str | None = None
    base64Array: list[str] | None = None
    base64: str | None = None
    botType: str | None = None
    dimensions: str | None = None
    taskId: str | None = None
    action: str | None = None
    index: int | None = None
    zoom: float | None = None
    direction: str | None = None
    maskBase64: str | None = None


class UpstreamSubmitted(msgspec.Struct):
    code: int
    description: str = ""
    result: str | int | None = None


class UpstreamTask(msgspec.Struct):
    id: str | int
    status: str = ""
    progress: str = ""
    imageUrl: str | None = None
    prompt: str | None = None
    promptEn: str | None = None
    description: str | None = None
    failReason: str | None = None
    properties: dict[str, str | int | None] = {}


# --- stored with the task ------------------------------------------------------------------------


class Stored(msgspec.Struct, omit_defaults=True):
    """``TaskRecord.request_json``: what the client asked, as the gateway normalised it."""

    prompt: str = ""
    parent: str = ""  # the gateway id of the task a follow-up acts on
    index: int = 0
    detail: str = ""  # direction, zoom factor, dimensions


class Result(msgspec.Struct, omit_defaults=True):
    """``TaskRecord.result_json``: the upstream's latest view, minus its ids."""

    imageUrl: str = ""
    prompt: str = ""  # the upstream's: a DESCRIBE task's descriptions
    promptEn: str = ""
    description: str = ""
    finalPrompt: str = ""
    messageId: str = ""
    channelId: str = ""
