"""The ``music`` upstream: its adapter (credential), the submit call, and the engine's view of its
tasks (``MusicTasks``: batch polls through ``POST /music/fetch``, status meanings, callbacks).

A media upstream speaks the same task API the gateway exposes (CONTRACT 3). The client's
``notify_hook`` is never sent upstream: the gateway itself sends callbacks.
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
from translators.music.render import callback_body, upstream_clips
from translators.music.wire import Result, UpstreamBody, UpstreamFetched, UpstreamSubmitted, UpstreamTask

PROTOCOL = "music"
_PHASES: dict[str, Phase] = {"PENDING": "queued", "TEXT_GENERATING": "running", "FIRST_SUCCESS": "running",
                             "STREAMING": "running", "SUCCESS": "succeeded", "FAILURE": "failed"}
_submitted = msgspec.json.Decoder(UpstreamSubmitted)
_fetched = msgspec.json.Decoder(UpstreamFetched)
_encode = msgspec.json.Encoder()


ADAPTER = BearerTaskAdapter(PROTOCOL)


async def submit(http: TaskHttp, upstream: UpstreamConfig, body: UpstreamBody, request_id: str) -> Submitted:
    reply = await http.call(upstream, "POST", "/music/submit/music", _encode.encode(body),
                            request_id=request_id)
    if reply.status >= 400:
        raise refusal(reply, "message")
    try:
        answer = _submitted.decode(reply.body)
    except msgspec.DecodeError as exc:
        raise UpstreamError("The music upstream answered a submission in an unknown shape.") from exc
    if answer.code != "success" or not answer.data:
        raise UpstreamHTTPError(400, scrub_secrets(answer.message)
                                or f"The upstream refused the task (code {answer.code}).")
    return Submitted(answer.data, Snapshot(status="PENDING", phase="queued", progress="0"))


def snapshot(up: UpstreamTask) -> Snapshot:
    phase = _PHASES.get(up.status, "running")
    status = up.status if up.status in _PHASES else "STREAMING"
    progress = str(100 if phase == "succeeded" else max(0, min(up.progress or 0, 100)))
    result = _encode.encode(Result(clips=up.clips)).decode()
    if phase == "failed":
        return Snapshot(status=status, phase=phase, progress=progress, result_json=result,
                        fail_reason=up.failure_reason or "the upstream reported a failure")
    if phase == "succeeded" and not any(c.audio_url for c in up.clips):
        return Snapshot(status="FAILURE", phase="failed", progress=progress,
                        fail_reason="the upstream finished without a clip")
    return Snapshot(status=status, phase=phase, progress=progress, result_json=result)


class MusicTasks:
    """Music as the task engine sees it (``gateway.tasks.TaskFamily``)."""

    name = PROTOCOL
    protocol = PROTOCOL
    failure_status = "FAILURE"
    poll_batch = 50

    async def poll(self, http: TaskHttp, upstream: UpstreamConfig,
                   tasks: Sequence[TaskRecord]) -> Mapping[str, Snapshot]:
        ids = [t.upstream_task_id for t in tasks]
        found = await query_batch(http, upstream, "/music/fetch", ids, "the music fetch", _fetched)
        wanted = set(ids)
        return {t.task_id: snapshot(t) for t in found.data if t.task_id in wanted}

    def callback_payload(self, task: TaskRecord) -> bytes | None:
        return callback_body(task)

    def media(self, task: TaskRecord) -> Mapping[str, MediaItem]:
        """Each clip's audio, video and cover (``clip<n>-audio`` ...), served by the gateway at its
        own links (CONTRACT 6d); a streaming clip's audio is there before the task ends."""
        found: dict[str, MediaItem] = {}
        for n, clip in enumerate(upstream_clips(task), start=1):
            for kind, url, ext, media_type in (("audio", clip.audio_url, "mp3", "audio/mpeg"),
                                               ("video", clip.video_url, "mp4", "video/mp4"),
                                               ("image", clip.image_url, "jpg", "image/jpeg")):
                if url:
                    found[f"clip{n}-{kind}"] = file_item(url, ext, media_type)
        return found
