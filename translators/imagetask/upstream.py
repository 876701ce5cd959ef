"""The ``imagetask`` upstream: its adapter (credential), the submit call, and the engine's view of
its tasks (``ImageTasks``: batch polls through list-by-condition, status meanings, callbacks).

A media upstream speaks the same task API the gateway exposes (CONTRACT 3): submissions go to
``/imagetask/submit/<kind>`` with the upstream's own task ids in follow-ups, polls to
``/imagetask/task/list-by-condition``. The client's callback URL and ``state`` are never sent
upstream: the gateway itself sends callbacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from gateway.api import UpstreamConfig, UpstreamError, UpstreamHTTPError
from gateway.api.relay import scrub_secrets
from gateway.api.tasks import (
    BearerTaskAdapter,
    MediaItem,
    Phase,
    Snapshot,
    Submitted,
    TaskHttp,
    TaskRecord,
    file_item,
    query_batch,
    refusal,
)
from translators.imagetask.render import callback_out, result
from translators.imagetask.wire import Result, UpstreamSubmit, UpstreamSubmitted, UpstreamTask

PROTOCOL = "imagetask"
LIST_PATH = "/imagetask/task/list-by-condition"
_PHASES: dict[str, Phase] = {"NOT_START": "queued", "SUBMITTED": "queued", "IN_PROGRESS": "running",
                             "SUCCESS": "succeeded", "FAILURE": "failed", "CANCEL": "failed"}
_SHOWN = {"CANCEL": "FAILURE"}  # statuses outside spec 3.1, as the client sees them
_submitted = msgspec.json.Decoder(UpstreamSubmitted)
_tasks = msgspec.json.Decoder(list[UpstreamTask])
_result = msgspec.json.Encoder()  # results, submissions and callback bodies


ADAPTER = BearerTaskAdapter(PROTOCOL)


async def submit(http: TaskHttp, upstream: UpstreamConfig, kind: str, body: UpstreamSubmit,
                 request_id: str) -> Submitted:
    """POST ``/imagetask/submit/<kind>``; the upstream's id and first state, or the upstream's
    refusal as an error for the client (its 4xx status, or 400 for a refusal code)."""
    reply = await http.call(upstream, "POST", f"/imagetask/submit/{kind}", _result.encode(body),
                            request_id=request_id)
    if reply.status >= 400:
        raise refusal(reply, "description")
    try:
        answer = _submitted.decode(reply.body)
    except msgspec.DecodeError as exc:
        raise UpstreamError("The image-task upstream answered a submission in an unknown shape.") from exc
    if answer.code not in (1, 22) or answer.result in (None, ""):
        reason = answer.description or f"The upstream refused the task (code {answer.code})."
        raise UpstreamHTTPError(400, scrub_secrets(reason))
    status = "NOT_START" if answer.code == 22 else "SUBMITTED"  # 22: in the upstream's queue
    return Submitted(str(answer.result), Snapshot(status=status, phase="queued", progress="0%"))


def snapshot(task: UpstreamTask) -> Snapshot:
    phase = _PHASES.get(task.status, "running")
    status = _SHOWN.get(task.status, task.status if task.status in _PHASES else "IN_PROGRESS")
    props = task.properties
    result = Result(imageUrl=task.imageUrl or "", prompt=task.prompt or "", promptEn=task.promptEn or "",
                    description=task.description or "", finalPrompt=str(props.get("finalPrompt") or ""),
                    messageId=str(props.get("messageId") or ""),
                    channelId=str(props.get("channelId") or props.get("discordChannelId") or ""))
    progress = task.progress or ("100%" if phase == "succeeded" else "0%")
    return Snapshot(status=status, phase=phase, progress=progress,
                    result_json=_result.encode(result).decode(),
                    fail_reason=(task.failReason or "the upstream reported a failure")
                    if phase == "failed" else None)


class ImageTasks:
    """The image family as the task engine sees it (``gateway.tasks.TaskFamily``)."""

    name = PROTOCOL
    protocol = PROTOCOL
    failure_status = "FAILURE"
    poll_batch = 50

    async def poll(self, http: TaskHttp, upstream: UpstreamConfig,
                   tasks: Sequence[TaskRecord]) -> Mapping[str, Snapshot]:
        ids = [t.upstream_task_id for t in tasks]
        found = await query_batch(http, upstream, LIST_PATH, ids, "list-by-condition", _tasks)
        wanted = set(ids)
        return {str(t.id): snapshot(t) for t in found if str(t.id) in wanted}

    def callback_payload(self, task: TaskRecord) -> bytes | None:
        return _result.encode(callback_out(task))

    def media(self, task: TaskRecord) -> Mapping[str, MediaItem]:
        """The image (``imageUrl``), served by the gateway at its own link (CONTRACT 6d)."""
        url = result(task).imageUrl
        return {"image": file_item(url, "png", "image/png")} if url else {}
