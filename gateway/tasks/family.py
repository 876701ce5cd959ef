"""What a task family (image, video, music, ...) gives the task engine, and what it gets back.

A family is a plain object returned from the ``gateway_task_families`` hook. The engine never
knows a family's wire format: it asks the family to poll its upstream and to turn a task into a
callback body; the family's own routes decode client requests, call ``TaskEngine.submit`` and
render stored ``TaskRecord`` objects in their own shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec

from gateway.relay.translation import ProtocolAdapter
from gateway.tasks.upstream import TaskHttp
from gateway.upstream.pool import Target

if TYPE_CHECKING:
    from gateway.settings.config import UpstreamConfig
    from gateway.storage.rows import TaskRecord

__all__ = ["Candidate", "Phase", "Snapshot", "Submitted", "TaskAdapter", "TaskFamily"]

# What a family status means to the engine. ``queued`` and ``running`` keep the task polled;
# ``succeeded`` charges it, ``failed`` releases its hold; both end polling and are final.
Phase = Literal["queued", "running", "succeeded", "failed"]
FINAL_PHASES: frozenset[str] = frozenset({"succeeded", "failed"})


class Snapshot(msgspec.Struct, frozen=True):
    """What the upstream said about one task, in the family's own terms."""

    status: str  # the family's status value, stored as ``TaskRecord.status`` (e.g. IN_PROGRESS)
    phase: Phase
    progress: str = ""  # the family's progress text (e.g. "40%"); stored as is
    result_json: str | None = None  # family data to keep (links, clips...); None keeps the stored
    fail_reason: str | None = None  # for ``failed``
    # For ``succeeded``: the actual charge in nano-USD (capped at the hold); None charges the
    # task's ``price_nano`` (what was reserved for the chosen upstream).
    charge_nano: int | None = None


class Submitted(msgspec.Struct, frozen=True):
    """The upstream accepted a task: its id (kept from the client) and its first state."""

    upstream_task_id: str
    snapshot: Snapshot


class Candidate(msgspec.Struct, frozen=True):
    """One upstream a submission may go to, with the model it is priced at and that price."""

    target: Target
    model: str  # public model id the task is priced (and logged) at
    price_nano: int  # reserved at submit, charged on success unless the snapshot says otherwise


class TaskFamily(Protocol):
    """A family of asynchronous tasks as the engine sees it. One object per plugin manager,
    holding no per-task state."""

    name: str  # ``TaskRecord.family`` and the request log's family (e.g. "imagetask")
    protocol: str  # the ``upstreams[].protocol`` its tasks run on
    failure_status: str  # the status a task gets when the engine fails it (timeout, forgotten)
    poll_batch: int  # upstream ids asked per poll call; 1 when the upstream has no batch query

    async def poll(self, http: TaskHttp, upstream: UpstreamConfig,
                   tasks: Sequence[TaskRecord]) -> Mapping[str, Snapshot]:
        """Ask ``upstream`` about ``tasks`` (at most ``poll_batch``, all on that upstream): one
        snapshot per ``upstream_task_id`` the upstream still knows. An id left out of the answer
        is a task the upstream forgot: the engine fails it and releases its hold. Raise
        ``UpstreamFailure`` (or ``UpstreamError``) when the upstream could not answer: the tasks
        are simply asked again on the next cycle."""
        ...

    def callback_payload(self, task: TaskRecord) -> bytes | None:
        """The JSON body POSTed to ``task.notify_hook`` after ``task`` changed status (the task as
        stored after the change); None sends nothing."""
        ...


class TaskAdapter(ProtocolAdapter, Protocol):
    """The upstream adapter of a task protocol (capabilities ``{"task"}``): it only carries the
    upstream's credential; the family builds its calls (see ``TaskHttp``)."""
