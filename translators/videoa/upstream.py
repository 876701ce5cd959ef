"""The ``videoa`` upstream: its adapter (credential), the submit call, the download of a result,
and the engine's view of its tasks (``VideoaTasks``: one status GET per task, status meanings,
the actual charge).

A media upstream speaks the same task API the gateway exposes (CONTRACT 3): submissions go to
``/videoa/v1/videos/generations``, polls to ``/videoa/v1/tasks/<upstream id>``, downloads to
``/videoa/v1/videos/generations/<upstream id>.mp4``.
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
    poll_each,
    prorated_charge,
    refusal,
)
from translators.videoa.wire import Result, Stored, UpstreamBody, UpstreamSubmitted, UpstreamTask

PROTOCOL = "videoa"
SUBMIT_PATH = "/videoa/v1/videos/generations"
_PHASES: dict[str, Phase] = {"queued": "queued", "generating": "running", "completed": "succeeded",
                             "failed": "failed"}
_submitted = msgspec.json.Decoder(UpstreamSubmitted)
_task = msgspec.json.Decoder(UpstreamTask)
_stored = msgspec.json.Decoder(Stored)
_encode = msgspec.json.Encoder()


ADAPTER = BearerTaskAdapter(PROTOCOL)


async def submit(http: TaskHttp, upstream: UpstreamConfig, body: UpstreamBody, request_id: str) -> Submitted:
    reply = await http.call(upstream, "POST", SUBMIT_PATH, _encode.encode(body), request_id=request_id)
    if reply.status >= 400:
        raise refusal(reply)
    try:
        answer = _submitted.decode(reply.body)
    except msgspec.DecodeError as exc:
        raise UpstreamError("The video upstream answered a submission in an unknown shape.") from exc
    return Submitted(answer.taskId, Snapshot(status="queued", phase="queued", progress="0%"))


def actual_charge(task: TaskRecord, seconds: float | None) -> int | None:
    """The charge for ``seconds`` of video made: the task's price (per second x the seconds asked
    for, with the group ratio, as reserved) scaled to the seconds the upstream reports, rounded up,
    never above the price. None (the price) when the upstream reports no seconds."""
    asked = _stored.decode(task.request_json).duration if task.request_json else 0
    return prorated_charge(task.price_nano, seconds, asked)


def snapshot(task: TaskRecord, up: UpstreamTask) -> Snapshot:
    phase = _PHASES.get(up.status, "running")
    status = up.status if up.status in _PHASES else "generating"
    if phase == "failed":
        return Snapshot(status="failed", phase=phase, fail_reason=up.failed_reason
                        or "the upstream reported a failure")
    if phase != "succeeded":
        return Snapshot(status=status, phase=phase, progress="0%" if phase == "queued" else "50%")
    data = up.data
    if data is None or not data.results:
        return Snapshot(status="failed", phase="failed",
                        fail_reason="the upstream finished the task without a result")
    result = Result(results=data.results, processing_time=data.processing_time, seconds=data.duration)
    return Snapshot(status="completed", phase="succeeded", progress="100%",
                    result_json=_encode.encode(result).decode(),
                    charge_nano=actual_charge(task, data.duration))


def _status_path(upstream_id: str) -> str:
    return f"/videoa/v1/tasks/{upstream_id}"


def _read(task: TaskRecord, body: bytes) -> Snapshot:
    try:
        up = _task.decode(body)
    except msgspec.DecodeError as exc:
        raise UpstreamError("the task status came in an unknown shape") from exc
    return snapshot(task, up)


class VideoaTasks:
    """Video task A as the task engine sees it (``gateway.tasks.TaskFamily``)."""

    name = PROTOCOL
    protocol = PROTOCOL
    failure_status = "failed"
    poll_batch = 1  # the API has no batch query

    async def poll(self, http: TaskHttp, upstream: UpstreamConfig,
                   tasks: Sequence[TaskRecord]) -> Mapping[str, Snapshot]:
        return await poll_each(http, upstream, tasks, _status_path, "the task status", _read)

    def callback_payload(self, task: TaskRecord) -> bytes | None:
        return None  # spec 6.5: video tasks send no callbacks

    def media(self, task: TaskRecord) -> Mapping[str, MediaItem]:
        """The finished video, asked at the upstream's own download path (with its credential;
        redirects followed through the SSRF guard): the ``.mp4`` endpoint and ``/v1/media``."""
        if task.status != "completed" or not task.upstream_task_id:
            return {}
        return {"video": MediaItem(f"{SUBMIT_PATH}/{task.upstream_task_id}.mp4", "mp4", "video/mp4")}
