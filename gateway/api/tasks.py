"""Asynchronous task families (images, video, music): the ``TaskFamily`` a plugin returns from
``gateway_task_families``, the engine that submits, polls, charges or refunds once and calls back
(``engine_of(gateway)``), and the helpers for Bearer task upstreams. See ``gateway.tasks``."""

from __future__ import annotations

from gateway.storage.rows import TaskRecord
from gateway.tasks import (
    Candidate,
    NewTask,
    Snapshot,
    Submitted,
    TaskAdapter,
    TaskEngine,
    TaskFamily,
    engine_of,
)
from gateway.tasks.download import relay
from gateway.tasks.family import Phase
from gateway.tasks.media import MediaItem, file_item
from gateway.tasks.routes import routes as media_routes
from gateway.tasks.upstream import (
    BearerTaskAdapter,
    TaskHttp,
    poll_each,
    prorated_charge,
    query_batch,
    refusal,
)

__all__ = [
    "BearerTaskAdapter",
    "Candidate",
    "MediaItem",
    "NewTask",
    "Phase",
    "Snapshot",
    "Submitted",
    "TaskAdapter",
    "TaskEngine",
    "TaskFamily",
    "TaskHttp",
    "TaskRecord",
    "engine_of",
    "file_item",
    "media_routes",
    "poll_each",
    "prorated_charge",
    "query_batch",
    "refusal",
    "relay",
]
