"""The values the storage interface (``gateway.storage.base.Storage``) takes and returns: holds and
their settlements, task and document records, changes, filters, audit findings. Plain msgspec
Structs and two exceptions; no behaviour.
"""

from __future__ import annotations

import msgspec

from gateway.accounts.records import RequestLog

# The ``instance`` of a hold that belongs to a durable record (a media task) instead of a process:
# the record's own state machine closes it (``transition_task``), so neither the orphan sweeper
# nor a process's start or stop releases it. A task outlives the process that accepted it.
DURABLE_HOLDER = "durable"
# The request id of a quota lease's hold starts with this (``gateway.accounts.metering.quota_leases``); a
# call's own request id never does (the gateway makes them: ``req_...``).
LEASE_PREFIX = "lease:"


class Reservation(msgspec.Struct, frozen=True):
    request_id: str
    user_id: int
    key_id: int
    amount_nano: int
    instance: str  # the gateway process that holds it (see ``release_orphaned_reservations``),
    # or DURABLE_HOLDER
    # The quota lease (``gateway.accounts.metering.quota_leases``) whose row holds this amount instead of a
    # row of its own: closing it takes ``amount_nano`` out of that row. A hold whose ``lease`` is
    # its own ``request_id`` is the lease itself: reserving it adds to the lease's row.
    lease: str | None = None


class Settlement(msgspec.Struct, frozen=True):
    """Close a reservation: charge ``charge_nano``, or 0 to release. A charge above the reservation
    takes the excess from what the user's balance and the key's ceiling still allow, in the same
    transaction; the rest is recorded as uncharged (``RequestLog.uncharged_nano``, an
    ``uncharged`` ledger row), and the log's ``charge_nano`` / ``uncharged_nano`` are set to what
    was booked."""

    reservation: Reservation
    charge_nano: int
    log: RequestLog | None = None  # the request log row written in the same transaction


class DailyCost(msgspec.Struct):
    day: str  # YYYY-MM-DD (UTC)
    model: str
    cost_nano: int


class LogPage(msgspec.Struct):
    items: list[RequestLog]
    total: int
    # The id of the page's last row when the page is full: ``LogFilter.before`` for the next page.
    next_before: int | None = None


class TaskRecord(msgspec.Struct, omit_defaults=True):
    """A media task (image, video, music). ``version`` is the compare-and-swap counter: every
    ``update_task_cas`` must name the version it read, so a transition (and its refund or
    callback) happens exactly once even with several pollers."""

    task_id: str  # the gateway's own id, handed to the client
    user_id: int
    key_id: int
    family: str  # imagetask | videoa | videos | music
    action: str = ""  # IMAGINE, UPSCALE, generate, ...
    model: str = ""
    request_id: str = ""  # the request (and reservation) that pays for it
    upstream: str = ""  # upstream name
    upstream_task_id: str = ""
    status: str = ""
    progress: str = ""
    request_json: str = "{}"
    result_json: str | None = None
    fail_reason: str | None = None
    billing_status: str = ""  # "" | reserved | charged | refunded
    reserved_nano: int = 0
    charged_nano: int = 0
    notify_hook: str | None = None
    state: str | None = None  # client pass-through echoed in callbacks
    created_at: float = 0.0
    updated_at: float = 0.0
    finished_at: float | None = None
    next_poll_at: float | None = None  # None: nothing to poll
    version: int = 0
    # Added by migration 0003 (the task engine, ``gateway.tasks``):
    price_nano: int = 0  # what a success costs (the price of the chosen upstream), <= reserved_nano
    started_at: float | None = None  # first seen running upstream
    polled_at: float | None = None  # last time the upstream answered about it
    route: str = ""  # the submit endpoint (for the request log row of its charge or refund)
    # Added by migration 0017: the submission's failed attempts (``RequestLog.attempt_log``).
    attempt_log: str | None = None


class NameTaken(Exception):
    """A user name that another live user already has (names are unique)."""


class DocumentExists(Exception):
    """``put_document`` found a document (live or deleted) with the same kind and id."""


class Document(msgspec.Struct, frozen=True):
    """A small JSON body a plugin keeps for a user, addressed by ``(kind, id)``: the core stores it
    and never reads ``body`` (e.g. the turns of a server-side conversation)."""

    kind: str
    id: str
    user_id: int  # the owner
    body: str  # JSON text
    created_at: float = 0.0  # Unix seconds; 0 on put means now


class TaskCallback(msgspec.Struct, frozen=True):
    """A queued callback of a task's status change (the task engine's outbox, migration 0005)."""

    id: int
    task_id: str
    url: str
    body: str  # JSON
    attempts: int = 0


class AuditProblem(msgspec.Struct):
    subject: str  # "user 3" / "key 7"
    problem: str


class UnchargedEntry(msgspec.Struct):
    """A served call's cost that could not be charged (balance or key ceiling exhausted)."""

    ts: float
    request_id: str
    user_id: int
    key_id: int | None
    uncharged_nano: int


class SoftLimitCrossing(msgspec.Struct, frozen=True):
    """A soft limit just reached (``gateway.accounts.softlimit``): ``scope`` "key" compares the key's
    ``spent_nano``, "user" the user's ``used_nano``, with the threshold ``soft_limit_nano``."""

    scope: str
    user_id: int
    key_id: int | None
    soft_limit_nano: int
    spent_nano: int


class KeyChanges(msgspec.Struct, omit_defaults=True):
    """Fields of a PATCH; UNSET leaves a field as it is, None clears a nullable one."""

    name: str | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    quota_nano: int | msgspec.UnsetType | None = msgspec.UNSET
    models: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    allow_ips: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    expires_at: int | msgspec.UnsetType = msgspec.UNSET
    rpm: int | msgspec.UnsetType | None = msgspec.UNSET
    tpm: int | msgspec.UnsetType | None = msgspec.UNSET
    soft_limit_nano: int | msgspec.UnsetType | None = msgspec.UNSET
    budget_nano: int | msgspec.UnsetType | None = msgspec.UNSET
    budget_period: str | msgspec.UnsetType | None = msgspec.UNSET
    cache_responses: bool | msgspec.UnsetType = msgspec.UNSET


class UserChanges(msgspec.Struct, omit_defaults=True):
    """Fields of PATCH /admin/users/{id}; UNSET leaves a field as it is."""

    name: str | msgspec.UnsetType = msgspec.UNSET
    group: str | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    soft_limit_nano: int | msgspec.UnsetType | None = msgspec.UNSET
    budget_nano: int | msgspec.UnsetType | None = msgspec.UNSET
    budget_period: str | msgspec.UnsetType | None = msgspec.UNSET


class LogFilter(msgspec.Struct, omit_defaults=True):
    """Which request-log rows a log query returns (None: any). ``since`` inclusive, ``until``
    exclusive, Unix seconds."""

    user_id: int | None = None
    key_id: int | None = None
    model: str | None = None
    status: int | None = None
    request_id: str | None = None
    since: float | None = None
    until: float | None = None
    # Keyset paging: only rows listed after the row with this id (the previous page's
    # ``next_before``); a page reached this way costs the same at any depth, unlike an offset.
    before: int | None = None


class IdempotencyEntry(msgspec.Struct, frozen=True):
    """What an ``Idempotency-Key`` already holds (CONTRACT 4c): the request it was first used for
    (``request_hash``) and its answer, ``status`` None while that request is still being served;
    ``age_s`` since it was claimed, by the database's clock."""

    request_hash: str
    status: int | None
    answer: str | None
    age_s: float
