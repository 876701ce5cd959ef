"""A stored music task as the client sees it (spec 2.5): the gateway's task id, clips under the
gateway's own ids (``<task id>_<n>``, n from 1), ``failure_reason`` only when it failed, times in
Unix seconds. Nothing of the upstream's ids is in it."""

from __future__ import annotations

import msgspec

from gateway.api.tasks import TaskRecord
from translators.music.wire import Clip, FetchOut, Result, Stored, TaskOut

_result = msgspec.json.Decoder(Result)
_stored = msgspec.json.Decoder(Stored)
_encode = msgspec.json.Encoder()


def stored(task: TaskRecord) -> Stored:
    return _stored.decode(task.request_json) if task.request_json else Stored()


def upstream_clips(task: TaskRecord) -> list[Clip]:
    return _result.decode(task.result_json).clips if task.result_json else []


def clip_id(task_id: str, index: int) -> str:
    return f"{task_id}_{index + 1}"


def parse_clip_id(value: str) -> tuple[str, int] | None:
    """(task id, index) of a clip id this gateway handed out; None for any other string."""
    task_id, sep, n = value.strip().rpartition("_")
    if not sep or not task_id or not n.isdigit() or int(n) < 1:
        return None
    return task_id, int(n) - 1


def _seconds(value: float | None) -> int | None:
    return None if value is None else int(value)


def task_out(task: TaskRecord) -> TaskOut:
    clips = [msgspec.structs.replace(c, id=clip_id(task.task_id, i))
             for i, c in enumerate(upstream_clips(task))]
    failed = task.status == "FAILURE"
    return TaskOut(task_id=task.task_id, action=task.action, status=task.status,
                   progress=int(task.progress) if task.progress.isdigit() else 0, clips=clips,
                   submit_time=int(task.created_at), start_time=_seconds(task.started_at),
                   finish_time=_seconds(task.finished_at),
                   failure_reason=(task.fail_reason or "the task failed") if failed else None)


def callback_body(task: TaskRecord) -> bytes:
    """The callback (spec 6.2: payload not shown): the same body as a fetch of the task."""
    return _encode.encode(FetchOut(code="success", data=task_out(task)))
