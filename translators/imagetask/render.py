"""A stored image task as the client sees it (spec 2.2): the gateway's id, times in Unix
milliseconds, ``buttons`` once it succeeded, ``failReason`` when it failed. Nothing of the
upstream's ids is in it."""

from __future__ import annotations

import msgspec

from gateway.api.tasks import TaskRecord
from translators.imagetask.actions import buttons
from translators.imagetask.wire import CallbackOut, Properties, Result, Stored, TaskOut

_stored = msgspec.json.Decoder(Stored)
_result = msgspec.json.Decoder(Result)
_DESCRIPTIONS = {"NOT_START": "Waiting to be submitted", "SUBMITTED": "Submitted",
                 "IN_PROGRESS": "In progress", "SUCCESS": "Finished", "FAILURE": "Failed"}


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1000)


def stored(task: TaskRecord) -> Stored:
    return _stored.decode(task.request_json) if task.request_json else Stored()


def result(task: TaskRecord) -> Result:
    return _result.decode(task.result_json) if task.result_json else Result()


def _prompt(task: TaskRecord, req: Stored, res: Result) -> str:
    """What the client asked; for a DESCRIBE (which asks no prompt) the descriptions it found."""
    if task.action == "DESCRIBE" and not req.prompt:
        return res.prompt or res.promptEn
    return req.prompt


def task_out(task: TaskRecord) -> TaskOut:
    req, res = stored(task), result(task)
    return TaskOut(
        id=task.task_id, action=task.action, status=task.status, progress=task.progress or "0%",
        prompt=_prompt(task, req, res), promptEn=res.promptEn or req.prompt,
        description=res.description or _DESCRIPTIONS.get(task.status, task.status),
        submitTime=int(task.created_at * 1000), startTime=_ms(task.started_at),
        finishTime=_ms(task.finished_at), imageUrl=res.imageUrl,
        failReason=task.fail_reason if task.status == "FAILURE" else None,
        properties=Properties(finalPrompt=res.finalPrompt or res.promptEn or req.prompt,
                              messageId=res.messageId, channelId=res.channelId),
        buttons=buttons(task), state=task.state)


def callback_out(task: TaskRecord) -> CallbackOut:
    return CallbackOut(id=task.task_id, action=task.action, status=task.status,
                       imageUrl=result(task).imageUrl,
                       state=task.state, progress=task.progress, failReason=task.fail_reason)
