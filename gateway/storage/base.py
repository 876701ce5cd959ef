"""The one async storage interface. SQLite and PostgreSQL implement it; callers never see SQL. The
values it takes and returns are in ``gateway.storage.rows``.

Money invariants every backend keeps, each inside one transaction:

* ``reserve`` is a single conditional update against both the user's balance and the key's
  ceiling (never a read-then-write): it succeeds only if ``balance >= amount`` and, when the key
  has a ceiling, ``spent + reserved + amount <= quota``.
* ``settle`` charges ``min(actual, reserved)`` and returns the rest to the balance; ``release``
  returns all of it. Both close the reservation exactly once (a second call is a no-op).
* Every change of a balance appends a ledger row in the same transaction, so that
  ``audit()`` can prove: balance == sum(ledger deltas) for each user, and for each key
  spent == sum(its charges) and reserved == sum(its open reservations).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.accounts.records import KeyRecord, RequestLog, UserRecord
from gateway.runtime.errors import ServiceUnavailable
from gateway.runtime.outage import Outage
from gateway.storage.rows import (
    AuditProblem,
    DailyCost,
    Document,
    IdempotencyEntry,
    KeyChanges,
    LogFilter,
    LogPage,
    Reservation,
    Settlement,
    SoftLimitCrossing,
    TaskCallback,
    TaskRecord,
    UnchargedEntry,
    UserChanges,
)
from gateway.storage.usage_rows import PruneStep, UsageQuery, UsageRow


class StorageUnavailable(ServiceUnavailable):
    """The database cannot be reached (refused, cut, shutting down, not answering): a 503 with
    ``Retry-After`` to a caller, and no stack trace (``Outage`` logs the outage once)."""

    def __init__(self, message: str = "The service is temporarily unavailable: its database does not "
                                      "answer. Nothing was charged; please retry shortly.") -> None:
        super().__init__(message)


class Storage(ABC):
    """Opened once per process; safe for concurrent use by many requests."""

    # A database server that can be out of reach has one (``StorageUnavailable``); a file does not.
    outage: Outage | None = None

    async def ping(self) -> None:
        """Raise when the database does not answer (``/readyz``)."""
        await self.auth_version()

    @abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations."""

    @abstractmethod
    async def close(self) -> None: ...

    # --- users -----------------------------------------------------------------------------------
    @abstractmethod
    async def create_user(self, name: str, group: str, balance_nano: int, token_hash: str,
                          request_id: str) -> UserRecord:
        """The opening balance is recorded as a ``topup`` ledger row."""

    @abstractmethod
    async def get_user(self, user_id: int) -> UserRecord | None: ...

    @abstractmethod
    async def user_by_token_hash(self, token_hash: str) -> UserRecord | None: ...

    @abstractmethod
    async def list_users(self) -> list[UserRecord]: ...

    @abstractmethod
    async def count_users(self) -> int: ...

    @abstractmethod
    async def claim_first_start(self) -> bool:
        """True for exactly one caller ever, and only while the database has no users: the
        process that then makes the demo user (several replicas may start at once)."""

    @abstractmethod
    async def topup(self, user_id: int, amount_nano: int, request_id: str) -> UserRecord | None: ...

    # --- keys ------------------------------------------------------------------------------------
    @abstractmethod
    async def create_key(self, key: KeyRecord) -> KeyRecord:
        """Insert (``id`` ignored, assigned by the store); returns the stored record."""

    @abstractmethod
    async def update_key(self, key_id: int, changes: KeyChanges) -> KeyRecord | None: ...

    @abstractmethod
    async def delete_key(self, key_id: int) -> bool: ...

    @abstractmethod
    async def get_key(self, key_id: int) -> KeyRecord | None: ...

    @abstractmethod
    async def key_by_hash(self, key_hash: str) -> KeyRecord | None: ...

    @abstractmethod
    async def list_keys(self, user_id: int | None = None) -> list[KeyRecord]: ...

    # --- money -----------------------------------------------------------------------------------
    @abstractmethod
    async def reserve(self, reservation: Reservation, room_nano: int | None = None) -> bool:
        """Atomically hold the amount; False (and no change at all) when it does not fit, or when
        the user's balance or the key's ceiling leave less than ``room_nano`` (default: the
        amount). If the await is cancelled or fails, the hold may or may not exist: settle it with
        charge 0 (a no-op when absent). ``request_id`` must not name another open reservation,
        unless it is a quota lease's (``reservation.lease == reservation.request_id``): that one
        is added to the lease's row. A hold carved from a lease (``lease`` another id) is moved
        out of the lease's row into a row of its own; False when the lease no longer holds it."""

    def reserve_soon(self, reservation: Reservation) -> asyncio.Future[bool]:
        """``reserve``, started now: its outcome. A storage that batches holds queues it for a
        batch that starts at the next turn of the event loop (one turn sooner than a task
        wrapping ``reserve`` would reach it)."""
        return asyncio.ensure_future(self.reserve(reservation))

    @abstractmethod
    async def settle_many(self, settlements: Sequence[Settlement],
                          logs: Sequence[RequestLog] = ()) -> None:
        """Close many reservations and write their request logs in one transaction, plus ``logs``
        of calls that held no reservation. A settlement whose reservation is already closed has no
        effect at all (no money, no log row). One carved from a quota lease (``lease`` set) takes
        its amount out of the lease's row; if that row no longer holds it (the lease was released
        as an orphan), the charge is taken like a charge above a hold, from what the balance and
        the key's ceiling allow now."""

    async def open_reservations(self, instance: str | None = None) -> list[Reservation]:
        """The open holds of calls and media tasks, all or those of one gateway process. A quota
        lease's slab is no call's hold: ``lease_holds`` tells what slabs hold."""
        raise NotImplementedError

    async def lease_holds(self, user_ids: Sequence[int]) -> dict[int, int]:
        """What the quota leases of every process hold of each user's money (users holding none
        are absent)."""
        raise NotImplementedError

    async def release_instance_reservations(self, instance: str) -> int:
        """Release (as ``crash_released``) every open reservation of ``instance``: used at start
        with the process's own id, whose earlier holds cannot be live. Returns how many."""
        raise NotImplementedError

    @abstractmethod
    async def heartbeat(self, instance: str) -> None:
        """Record that gateway process ``instance`` is alive (called every few seconds)."""

    @abstractmethod
    async def release_orphaned_reservations(self, stale_after_s: float) -> int:
        """Release every open reservation whose instance has sent no heartbeat for
        ``stale_after_s`` (a process that crashed), logging each as ``crash_released``; returns how
        many. Safe with several replicas: live processes keep their reservations. The rows of
        instances silent for an hour (``INSTANCE_ROWS_KEPT_S``) and holding nothing are pruned."""

    @abstractmethod
    async def audit(self) -> list[AuditProblem]: ...

    async def uncharged_entries(self, limit: int = 1000) -> list[UnchargedEntry]:
        """The newest ``uncharged`` ledger rows (what ``gateway audit`` lists)."""
        raise NotImplementedError

    # --- request log and usage ------------------------------------------------------------------
    @abstractmethod
    async def write_logs(self, logs: Sequence[RequestLog]) -> None:
        """Logs of calls that held no reservation (rejected before reserving)."""

    @abstractmethod
    async def log_page(self, user_id: int, page: int, page_size: int) -> LogPage: ...

    @abstractmethod
    async def daily_costs(self, key_id: int, start_ts: int, end_ts: int) -> list[DailyCost]: ...

    async def usage_rows(self, query: UsageQuery) -> list[UsageRow]:
        """Sums of the request log's roll-ups per span and ``query.group_by`` value
        (``gateway.storage.sql_usage``)."""
        raise NotImplementedError

    async def prune_logs(self, cutoff: float, holder: str, batch: int, lease_s: float) -> PruneStep:
        """One retention step: delete up to ``batch`` of the oldest request-log rows older than
        the hour of ``cutoff``, while ``holder`` holds the pruning lease (roll-ups stay)."""
        raise NotImplementedError

    async def release_prune_lease(self, holder: str) -> None:
        """Give the pruning lease up (at shutdown), so another process may take it at once."""
        raise NotImplementedError

    # --- change notification for caches in other processes -----------------------------------
    @abstractmethod
    async def auth_version(self) -> int:
        """A counter bumped by every change to keys or users that caches must see."""

    @abstractmethod
    async def bump_auth_version(self) -> int: ...

    def shared_auth_version(self) -> int | None:
        """The auth version as every process on this database sees it without a database read,
        where the backend keeps one in memory shared between them (SQLite: ``shared_counter``);
        None where only ``auth_version`` can tell."""
        return None

    # --- user administration (``sql_admin``) -------------------------------------------------------
    async def update_user(self, user_id: int, changes: UserChanges) -> UserRecord | None:
        """None for an unknown or deleted user. Raises ``NameTaken`` when the new name is in use."""
        raise NotImplementedError

    async def claim_soft_limit_crossings(self, user_id: int, key_id: int) -> list[SoftLimitCrossing]:
        """The soft limits of this user and key that are reached and not yet announced, each
        marked announced in the same statement (a conditional update: of several processes asking
        at once, exactly one gets a crossing)."""
        raise NotImplementedError

    async def delete_user(self, user_id: int) -> bool:
        """Mark deleted (keys and token stop; the row, ledger and logs stay); False if unknown."""
        raise NotImplementedError

    async def user_name_taken(self, name: str, except_id: int | None = None) -> bool:
        raise NotImplementedError

    async def adjust_balance(self, user_id: int, amount_nano: int, reason: str,
                             request_id: str) -> UserRecord | None:
        """Add ``amount_nano`` (negative lowers) with an ``adjust`` ledger row carrying ``reason``;
        None, and no change, when the user is unknown or the balance would go below zero."""
        raise NotImplementedError

    async def query_logs(self, where: LogFilter, page: int, page_size: int) -> LogPage:
        """Request logs of everyone matching ``where``, newest first."""
        raise NotImplementedError

    async def user_daily_costs(self, user_id: int, start_ts: int, end_ts: int) -> list[DailyCost]:
        """Charges per UTC day and model of all of a user's keys."""
        raise NotImplementedError

    async def user_tasks(self, user_id: int, page: int, page_size: int) -> tuple[list[TaskRecord], int]:
        """One page of a user's media tasks, newest first, and how many there are."""
        raise NotImplementedError

    # --- idempotency keys (``sql_idempotency``, CONTRACT 4c) ---------------------------------------
    async def claim_idempotency(self, scope: str, key: str, request_hash: str,
                                keep_s: float) -> IdempotencyEntry | None:
        """None when the caller now holds ``key`` of ``scope`` (exactly one of concurrent
        claimers does); else what the key holds. Entries older than ``keep_s`` are forgotten."""
        raise NotImplementedError

    async def idempotency_entry(self, scope: str, key: str) -> IdempotencyEntry | None:
        raise NotImplementedError

    async def finish_idempotency(self, scope: str, key: str, status: int, answer: str) -> None:
        raise NotImplementedError

    async def release_idempotency(self, scope: str, key: str) -> None:
        raise NotImplementedError

    # --- the response cache (``sql_cache``, ``plugins.cache``) -------------------------------------
    async def cached_answer(self, cache_key: str) -> str | None:
        """The entry kept under ``cache_key``, or None."""
        raise NotImplementedError

    async def keep_answer(self, cache_key: str, user_id: int, entry: str, created_at: float, *,
                          expired_before: float, max_entries: int, max_bytes: int) -> int:
        """Keep ``entry`` (replacing one of the same key), forget entries created before
        ``expired_before``, and evict the oldest while over ``max_entries`` or ``max_bytes``;
        returns how many were evicted."""
        raise NotImplementedError

    # --- documents (``sql_documents``) -------------------------------------------------------------
    @abstractmethod
    async def put_document(self, doc: Document) -> Document:
        """Insert, committed before returning (durable, and seen by every replica at once); raises
        ``DocumentExists`` when ``(kind, id)`` was ever used. Returns the stored document."""

    @abstractmethod
    async def get_document(self, kind: str, doc_id: str) -> Document | None:
        """The live document, whoever owns it (the caller checks ``user_id``); None when unknown or
        deleted."""

    @abstractmethod
    async def delete_document(self, kind: str, doc_id: str, user_id: int) -> bool:
        """Delete ``user_id``'s live document (its body is dropped, its id never reused); False when
        there is none of that owner."""

    # --- media tasks -----------------------------------------------------------------------------
    async def create_task(self, task: TaskRecord) -> TaskRecord:
        """Insert with ``version`` 0 (``created_at``/``updated_at`` default to now)."""
        raise NotImplementedError

    async def get_task(self, task_id: str) -> TaskRecord | None:
        raise NotImplementedError

    async def update_task_cas(self, task_id: str, expected_version: int,
                              changes: Mapping[str, Any]) -> TaskRecord | None:
        """Apply ``changes`` (TaskRecord field names) only if the stored version is still
        ``expected_version``; bumps the version and ``updated_at``. None when another writer won."""
        raise NotImplementedError

    async def due_tasks(self, now: float, limit: int) -> list[TaskRecord]:
        """Tasks whose ``next_poll_at`` is at or before ``now``, oldest first."""
        raise NotImplementedError

    # The task engine's (``sql_tasks``):
    async def claim_due_tasks(self, now: float, limit: int, owner: str, lease_s: float) -> list[TaskRecord]:
        """Due tasks not leased to another live poller, now leased to ``owner`` for ``lease_s``."""
        raise NotImplementedError

    async def release_task_leases(self, owner: str) -> int:
        raise NotImplementedError

    async def transition_task(self, task_id: str, expected_version: int, changes: Mapping[str, Any],
                              settlement: Settlement | None = None,
                              callback: tuple[str, str] | None = None) -> TaskRecord | None:
        """``update_task_cas`` plus, in the same transaction, the close of the task's hold and the
        queueing of a callback (url, JSON body)."""
        raise NotImplementedError

    async def claim_task_callbacks(self, now: float, limit: int, owner: str,
                                   lease_s: float) -> list[TaskCallback]:
        """Due callbacks, each the oldest still queued of its task, leased to ``owner``."""
        raise NotImplementedError

    async def finish_task_callback(self, callback_id: int) -> None:
        """Delivered or given up: remove it from the queue."""
        raise NotImplementedError

    async def retry_task_callback(self, callback_id: int, attempts: int, next_at: float) -> None:
        raise NotImplementedError

    async def release_callback_leases(self, owner: str) -> int:
        raise NotImplementedError

    async def tasks_by_ids(self, task_ids: Sequence[str]) -> list[TaskRecord]:
        raise NotImplementedError

    async def family_tasks(self, user_id: int, family: str, limit: int, *, after: TaskRecord | None = None,
                           newest_first: bool = True) -> list[TaskRecord]:
        """Up to ``limit`` of a user's tasks of ``family`` in creation order (newest first unless
        asked otherwise), those after ``after`` in that order (a cursor page)."""
        raise NotImplementedError

    async def delete_task(self, task_id: str) -> bool:
        raise NotImplementedError
