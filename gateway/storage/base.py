"""The one async storage interface. SQLite and PostgreSQL implement it; callers never see SQL.

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

from abc import ABC, abstractmethod
from collections.abc import Sequence

import msgspec

from gateway.records import KeyRecord, RequestLog, UserRecord


class Reservation(msgspec.Struct, frozen=True):
    request_id: str
    user_id: int
    key_id: int
    amount_nano: int
    instance: str  # the gateway process that holds it (see ``release_orphaned_reservations``)


class Settlement(msgspec.Struct, frozen=True):
    """Close a reservation: charge ``charge_nano`` (capped at the reservation), or 0 to release."""

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


class AuditProblem(msgspec.Struct):
    subject: str  # "user 3" / "key 7"
    problem: str


class KeyChanges(msgspec.Struct, omit_defaults=True):
    """Fields of a PATCH; UNSET leaves a field as it is, None clears a nullable one."""

    name: str | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    quota_nano: int | None | msgspec.UnsetType = msgspec.UNSET
    models: list[str] | None | msgspec.UnsetType = msgspec.UNSET
    allow_ips: list[str] | None | msgspec.UnsetType = msgspec.UNSET
    expires_at: int | msgspec.UnsetType = msgspec.UNSET


class Storage(ABC):
    """Opened once per process; safe for concurrent use by many requests."""

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
    async def reserve(self, reservation: Reservation) -> bool:
        """Atomically hold the amount; False (and no change at all) when it does not fit."""

    @abstractmethod
    async def settle_many(self, settlements: Sequence[Settlement]) -> None:
        """Close many reservations and write their request logs in one transaction."""

    @abstractmethod
    async def heartbeat(self, instance: str) -> None:
        """Record that gateway process ``instance`` is alive (called every few seconds)."""

    @abstractmethod
    async def release_orphaned_reservations(self, stale_after_s: float) -> int:
        """Release every open reservation whose instance has sent no heartbeat for
        ``stale_after_s`` (a process that crashed), logging each as ``crash_released``; returns how
        many. Safe with several replicas: live processes keep their reservations."""

    @abstractmethod
    async def audit(self) -> list[AuditProblem]: ...

    # --- request log and usage ------------------------------------------------------------------
    @abstractmethod
    async def write_logs(self, logs: Sequence[RequestLog]) -> None:
        """Logs of calls that held no reservation (rejected before reserving)."""

    @abstractmethod
    async def log_page(self, user_id: int, page: int, page_size: int) -> LogPage: ...

    @abstractmethod
    async def daily_costs(self, key_id: int, start_ts: int, end_ts: int) -> list[DailyCost]: ...

    # --- change notification for caches in other processes -----------------------------------
    @abstractmethod
    async def auth_version(self) -> int:
        """A counter bumped by every change to keys or users that caches must see."""

    @abstractmethod
    async def bump_auth_version(self) -> int: ...
