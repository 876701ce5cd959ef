"""The ``videos`` upstream: its adapter (credential), the create call, and the engine's view of its
tasks (``VideoTasks``: one retrieve per task, status meanings, the actual charge).

A media upstream speaks the same API the gateway exposes (CONTRACT 3): ``POST /v1/videos`` and
``GET /v1/videos/<upstream id>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from gateway.api import UpstreamConfig, UpstreamError
from gateway.api.tasks import (
    BearerTaskAdapter,
    MediaItem,
    Phase,
    Snapshot,
    Submitted,
    TaskHttp,
    TaskRecord,
    file_item,
    poll_each,
    prorated_charge,
    refusal,
)
from translators.videos.wire import Result, Stored, UpstreamBody, UpstreamVideo

PROTOCOL = "videos"
PATH = "/v1/videos"
# Spec 3.3's statuses; the OpenAI API's own ``in_progress`` means ``processing``.
_PHASES: dict[str, Phase] = {"queued": "queued", "processing": "running", "in_progress": "running",
                             "completed": "succeeded", "failed": "failed"}
_video = msgspec.json.Decoder(UpstreamVideo)
_stored = msgspec.json.Decoder(Stored)
_result = msgspec.json.Decoder(Result)
_encode = msgspec.json.Encoder()


ADAPTER = BearerTaskAdapter(PROTOCOL)


def _decode(body: bytes) -> UpstreamVideo:
    try:
        return _video.decode(body)
    except msgspec.DecodeError as exc:
        raise UpstreamError("The video upstream answered in an unknown shape.") from exc


async def create(http: TaskHttp, upstream: UpstreamConfig, body: UpstreamBody, request_id: str) -> Submitted:
    reply = await http.call(upstream, "POST", PATH, _encode.encode(body), request_id=request_id)
    if reply.status >= 400:
        raise refusal(reply)
    video = _decode(reply.body)
    return Submitted(video.id, Snapshot(status="queued", phase="queued", progress="0"))


def actual_charge(task: TaskRecord, made: float | None) -> int | None:
    """The price (per second x seconds asked, with the group ratio) scaled to the seconds the
    upstream reports making, rounded up, never above the price; None (the price) without them."""
    asked = _stored.decode(task.request_json).seconds if task.request_json else 0
    return prorated_charge(task.price_nano, made, asked)


def snapshot(task: TaskRecord, video: UpstreamVideo) -> Snapshot:
    phase = _PHASES.get(video.status, "running")
    status = {"running": "processing", "succeeded": "completed"}.get(phase, phase)
    progress = str(max(0, min(video.progress or 0, 100)))
    if phase == "failed":
        return Snapshot(status="failed", phase=phase, progress=progress,
                        fail_reason=video.failure_reason or "the upstream reported a failure")
    if phase != "succeeded":
        return Snapshot(status=status, phase=phase, progress=progress)
    duration = round(video.duration) if video.duration is not None else None
    result = Result(video_url=video.video_url, thumbnail_url=video.thumbnail_url, duration=duration)
    if not video.video_url:
        # The OpenAI API gives no links: its files are at the video's ``/content`` (with the
        # upstream's credential), kept as paths that the gateway's links then stand for.
        content = f"{PATH}/{video.id}/content"
        result = Result(video_url=content, thumbnail_url=f"{content}?variant=thumbnail", duration=duration)
    return Snapshot(status="completed", phase="succeeded", progress="100",
                    result_json=_encode.encode(result).decode(),
                    charge_nano=actual_charge(task, video.duration))


def _retrieve_path(upstream_id: str) -> str:
    return f"{PATH}/{upstream_id}"


def _read(task: TaskRecord, body: bytes) -> Snapshot:
    return snapshot(task, _decode(body))


class VideoTasks:
    """Video task B as the task engine sees it (``gateway.tasks.TaskFamily``)."""

    name = PROTOCOL
    protocol = PROTOCOL
    failure_status = "failed"
    poll_batch = 1  # the API has no batch query

    async def poll(self, http: TaskHttp, upstream: UpstreamConfig,
                   tasks: Sequence[TaskRecord]) -> Mapping[str, Snapshot]:
        return await poll_each(http, upstream, tasks, _retrieve_path, "the video retrieve", _read)

    def callback_payload(self, task: TaskRecord) -> bytes | None:
        return None  # spec 6.5: video tasks send no callbacks

    def media(self, task: TaskRecord) -> Mapping[str, MediaItem]:
        """The video and its thumbnail (the ``variant`` names of ``/content``), served by the
        gateway at its own links (CONTRACT 6d)."""
        res = _result.decode(task.result_json) if task.result_json else Result()
        found: dict[str, MediaItem] = {}
        if res.video_url:
            found["video"] = file_item(res.video_url, "mp4", "video/mp4")
        if res.thumbnail_url:
            found["thumbnail"] = file_item(res.thumbnail_url, "jpg", "image/jpeg")
        return found
