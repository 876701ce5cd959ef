"""Quota leases: a call's hold without a database transaction on its path.

A process serving calls on a key holds a slab of that key's room (its user's balance and its own
ceiling) as one durable reservation row, ``lease:<instance>:<key id>``, made by the same
conditional transaction as any hold (``Storage.reserve`` with a room requirement, group-committed
with the others). Calls are then held against the slab in memory; each one's settlement takes
what it closes out of the lease's row in the batch writer's transaction
(``sql_money.close_from_leases``), and the part of its hold it did not use goes back to the slab.

The money rules hold as they do for holds of their own:

* No overspend, on one process or several: a slab is a committed hold, so the room it came from
  was checked by the database, and a call is admitted only if the slab in memory covers its worst
  case. A charge above the hold takes the excess from the slab first, then, at settlement, from
  what the balance and the ceiling still allow.
* A slab is ``LEASE_CALLS`` worst cases of the call that asks for it (plus what the calls waiting
  for it ask, when the room takes that too), and is taken only while the
  room is at least ``LEASE_SHARE`` slabs; below that, calls hold rows of their own as before. So
  near exhaustion, where several processes compete for the last of a balance, every hold is exact,
  and a slab held by one process never kept more than 1/``LEASE_SHARE`` of the room from others.
* A key or user changed anywhere is seen by the next call, as when every call's hold was checked
  in the database: each call held from a lease reads the database's auth version (bumped by every
  change of a key or a user, by any process), one small read and no transaction, or takes the
  value of a read that began after the call arrived (under load one read serves many); on SQLite
  it reads the copy every process on the database file shares in memory, raised by each change
  before the change's caller hears it is done (``Storage.shared_auth_version``); a lease taken
  under another version ends, and the call holds from a new slab or a row of its own, whose
  transaction checks the key, its
  ceiling and the user's balance as they are now, and so does the new lease's first slab. So a
  key disabled on one replica is never served by another whose auth cache has not heard of it.
* The unused part of a slab goes back to the balance (a ``release`` ledger row under the lease's
  id, not counted as a request) when the lease has been idle for ``IDLE_RETURN_S``, when it ends
  (above), when a view of balances asks for read-your-writes (``Meter.settled``), on
  ``Meter.flush`` and at shutdown.
* kill -9: the dead process's lease rows are released by the orphan sweeper like any hold
  (``crash_released``, logged under the lease's id), so ``gateway audit`` stays clean; what it
  loses is the charges of the calls it answered in its last flush window, and the request-log
  rows of calls still in flight (their holds were inside the slab).

Who asks for a lease is the caller's choice (``Meter.reserve(from_lease=True)``): the relay does
for every call of the text families. A stream's hold is then moved out of the slab into a row of
its own (``name``: one transaction, group-committed, no money moved) while the upstream is called,
and the stream waits for that move before its first byte (``named``): so a crash mid-stream still
releases and logs that call by its request id, and the commit is off the time to first byte. A
media task's hold outlives the process (``durable``): never from a lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgspec

from gateway.accounts.records import KeyRecord, Principal, UserRecord
from gateway.storage.base import Storage, StorageUnavailable
from gateway.storage.rows import LEASE_PREFIX, Reservation, Settlement

log = logging.getLogger(__name__)

LEASE_CALLS = 32  # worst cases of the asking call in one slab
LEASE_SHARE = 8  # a slab only while the room is at least this many slabs
IDLE_RETURN_S = 1.0  # a lease unused this long gives its slab back
REFUSED_RETRY_S = 1.0  # after a refused slab, calls on the key hold their own rows this long
_MAX_SLAB = (2**63 - 1) // LEASE_SHARE  # the room test must fit a database integer


class _Lease:
    __slots__ = ("available", "extending", "id", "key", "last_used", "refused_until", "slab", "version",
                 "waiting")

    def __init__(self, lease_id: str, key: KeyRecord, version: int) -> None:
        self.id = lease_id
        self.key = key
        self.version = version  # the auth version read before its first slab was asked for
        self.available = 0  # held in the database and not carved out by a call in flight
        self.slab = 0
        self.extending: asyncio.Future[bool] | None = None
        self.waiting = 0  # what the calls waiting for a slab ask for together
        self.last_used = time.monotonic()
        self.refused_until = 0.0


async def as_shown(storage: Storage, users: list[UserRecord]) -> list[UserRecord]:
    """``users`` as a view of balances shows them: what the quota leases of any process hold of a
    user's money (slabs not used yet, holds of calls in flight on them) is not spent, so it counts
    in the balance shown. (This process's own unused slabs were given back by ``Meter.settled``.)"""
    held = await storage.lease_holds([u.id for u in users])
    if not held:
        return users
    return [msgspec.structs.replace(u, balance_nano=u.balance_nano + held[u.id]) if u.id in held else u
            for u in users]


def _pass_on(plain: asyncio.Future[bool], extended: asyncio.Future[bool]) -> None:
    """The waiters of a refused slab learn the outcome of the plain one asked in its place."""
    if not extended.done():
        extended.set_result(not plain.cancelled() and plain.exception() is None and plain.result())


def _moved(move: asyncio.Future[bool]) -> bool:
    """Whether a move committed. One that failed is taken as not made: its hold is then closed out
    of the slab, and if the move did commit after all, its own row stays open until this process's
    shutdown releases it (the books still balance)."""
    return not move.cancelled() and move.exception() is None and bool(move.result())


class QuotaLeases:
    """This process's leases, by key id. ``put`` queues a settlement for the batch writer."""

    def __init__(self, storage: Storage, instance_id: str, put: Callable[[Settlement], None]) -> None:
        self._storage = storage
        self._instance = instance_id
        self._put = put
        self._leases: dict[int, _Lease] = {}
        self._carved: dict[str, _Lease] = {}  # request id -> the lease its hold came from
        self._extensions: set[asyncio.Future[bool]] = set()
        self._given_back: set[int] = set()  # keys whose unused slab went back since ``return_key``
        self._moving: dict[str, asyncio.Future[bool]] = {}  # request id -> its hold's move (``name``)
        self._version = 0  # the last auth version read, and when (perf_counter) that read began
        self._version_read_at = float("-inf")

    async def hold(self, request_id: str, principal: Principal, amount_nano: int,
                   arrived: float | None = None) -> Reservation | None:
        """``amount_nano`` carved from the key's lease, topping the lease up if needed; None when
        no slab can be had (the caller then holds a row of its own). ``arrived``: when the call
        came in (``time.perf_counter()``), so that an auth-version read begun since can serve it."""
        key = principal.key
        lease = self._leases.get(key.id)
        if lease is not None and lease.available < amount_nano and lease.extending is None \
                and time.monotonic() < lease.refused_until:
            return None  # no slab to be had on this key for now: not even the version is asked
        version = self._storage.shared_auth_version()
        if version is None:
            version = await self._auth_version_since(arrived)
        lease = self._leases.get(key.id)  # the await may have let another call end or start it
        if lease is not None and lease.version != version:
            self._return(lease)  # a key or user changed since: the next slab is checked anew
            lease = None
        if lease is None:
            lease = self._leases[key.id] = _Lease(f"{LEASE_PREFIX}{self._instance}:{key.id}", key, version)
        while lease.available < amount_nano:
            if lease.extending is None:
                if time.monotonic() < lease.refused_until:
                    return None
                self._extend(lease, amount_nano)
            assert lease.extending is not None
            lease.waiting += amount_nano
            try:
                if not await asyncio.shield(lease.extending) or self._leases.get(key.id) is not lease:
                    return None
            finally:
                lease.waiting -= amount_nano
        lease.available -= amount_nano
        lease.last_used = time.monotonic()
        self._carved[request_id] = lease
        if lease.available * 4 < lease.slab and lease.extending is None \
                and lease.last_used >= lease.refused_until:
            self._extend(lease, amount_nano)  # topped up in the background: the next calls need not wait
        return Reservation(request_id=request_id, user_id=key.user_id, key_id=key.id,
                           amount_nano=amount_nano, instance=self._instance, lease=lease.id)

    async def _auth_version_since(self, arrived: float | None) -> int:
        """The auth version as a read begun after ``arrived`` saw it: every change committed before
        the call came in is in it, which is all a fresh read would promise. Under concurrency one
        read serves the calls that arrived before it began. (Where the storage shares the version
        in memory between its processes, ``hold`` reads that instead: no database read at all.)"""
        if arrived is not None and arrived <= self._version_read_at:
            return self._version
        began = time.perf_counter()
        version = await self._storage.auth_version()
        if began >= self._version_read_at:  # reads on PostgreSQL may end out of order
            self._version, self._version_read_at = version, began
        return version

    def name(self, hold: Reservation) -> None:
        """Start moving a carved hold into a row of its own (see the module's docstring)."""
        if hold.lease is None or hold.lease == hold.request_id or hold.request_id in self._moving:
            return
        move = self._storage.reserve_soon(hold)
        self._moving[hold.request_id] = move

        def done(move: asyncio.Future[bool]) -> None:
            if _moved(move):
                self._carved.pop(hold.request_id, None)  # no longer in the slab: its own row's now
                return
            why = "cancelled" if move.cancelled() else move.exception() or "the lease no longer held it"
            log.warning("%s's hold was not moved out of quota lease %s (%s): the call goes on held by "
                        "the slab", hold.request_id, hold.lease, why)

        move.add_done_callback(done)

    async def named(self, hold: Reservation) -> None:
        """Wait until ``hold``'s move (if one was started) is over."""
        move = self._moving.get(hold.request_id)
        if move is not None and not move.done():  # asyncio.wait would take a turn of the loop even then
            await asyncio.wait([move])

    def settle(self, hold: Reservation, charge_nano: int, put: Callable[[Reservation], None]) -> None:
        """``put`` the hold that the settlement of ``hold`` closes: a carved hold as ``closing``
        says, one moved into its own row as it is; a settlement that comes while the move is still
        being committed waits for it (``moves_done``)."""
        if hold.lease is None:
            put(hold)
            return
        move = self._moving.pop(hold.request_id, None)
        if move is None:
            put(self.closing(hold, charge_nano))
        elif move.done():
            put(self._after_move(hold, charge_nano, move))
        else:
            move.add_done_callback(lambda move: put(self._after_move(hold, charge_nano, move)))

    async def moves_done(self, timeout_s: float | None = None) -> None:
        """Wait for the moves being committed (and so for the settlements waiting on them)."""
        if self._moving:
            await asyncio.wait(list(self._moving.values()), timeout=timeout_s)

    def _after_move(self, hold: Reservation, charge_nano: int, move: asyncio.Future[bool]) -> Reservation:
        if _moved(move):
            return msgspec.structs.replace(hold, lease=None)
        return self.closing(hold, charge_nano)

    def closing(self, hold: Reservation, charge_nano: int) -> Reservation:
        """The part of the lease's row that the settlement of ``hold`` closes. While its lease is
        still this key's lease, the unused part of the hold goes back to the slab and a charge above
        the hold takes what the slab has; otherwise the whole hold is closed (its unused part goes
        back to the balance)."""
        lease = self._carved.pop(hold.request_id, None)
        held = hold.amount_nano
        if lease is None or self._leases.get(hold.key_id) is not lease:
            return hold
        charge = max(charge_nano, 0)
        if charge <= held:
            lease.available += held - charge
            closed = charge
        else:
            extra = min(charge - held, lease.available)
            lease.available -= extra
            closed = held + extra
        return msgspec.structs.replace(hold, amount_nano=closed)

    def return_key(self, key_id: int) -> bool:
        """Give back what the key's lease holds unused (the lease stays, with its refusal time);
        True when some of the key's unused money was queued to go back since the last call."""
        lease = self._leases.get(key_id)
        if lease is not None and lease.available:
            self._give_back(lease, lease.available)
            lease.available = 0
        if key_id not in self._given_back:
            return False
        self._given_back.discard(key_id)
        return True

    def return_idle(self) -> None:
        now = time.monotonic()
        for lease in list(self._leases.values()):
            if now - lease.last_used >= IDLE_RETURN_S:
                self._return(lease)

    def return_all(self) -> None:
        for lease in list(self._leases.values()):
            self._return(lease)

    async def close(self, timeout_s: float) -> None:
        """Give every slab back, including those of extensions still being committed (for at most
        ``timeout_s``: one the database never answers is released by the next start's sweep)."""
        self.return_all()
        if self._extensions:
            await asyncio.wait(list(self._extensions), timeout=timeout_s)
        await self.moves_done(timeout_s)

    def _return(self, lease: _Lease) -> None:
        """End ``lease``: its unused part is queued to go back to the balance. Calls still in flight
        on it close their whole holds when they end."""
        if self._leases.get(lease.key.id) is lease:
            del self._leases[lease.key.id]
        self._give_back(lease, lease.available)
        lease.available = 0

    def _give_back(self, lease: _Lease, amount_nano: int) -> None:
        if amount_nano > 0:
            if len(self._given_back) < 100_000:  # bounded; a key left out only misses a flush
                self._given_back.add(lease.key.id)
            self._put(Settlement(Reservation(
                request_id=lease.id, user_id=lease.key.user_id, key_id=lease.key.id, amount_nano=amount_nano,
                instance=self._instance, lease=lease.id), 0))

    def _extend(self, lease: _Lease, amount_nano: int, *, for_waiting: bool = True) -> None:
        """Ask the database for another slab (one conditional transaction, group-committed): the
        asking call's ``LEASE_CALLS`` worst cases, plus what the calls already waiting ask for
        (``for_waiting``). A burst of calls on one key is then served by one or two slabs, not by
        one slab per ``LEASE_CALLS`` calls, each waking every call still waiting (2,000 calls at
        once: 63 transactions and about 200 us of CPU a call, docs/performance.md). A slab so
        sized that the room refuses it is asked again at the plain size before calls are refused."""
        base = max(amount_nano, 1) * LEASE_CALLS
        slab = min(base + lease.waiting if for_waiting else base, _MAX_SLAB)
        ask = Reservation(request_id=lease.id, user_id=lease.key.user_id, key_id=lease.key.id,
                          amount_nano=slab, instance=self._instance, lease=lease.id)
        extended: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        lease.extending = extended
        self._extensions.add(extended)
        attempt = asyncio.ensure_future(self._storage.reserve(ask, room_nano=slab * LEASE_SHARE))

        def done(attempt: asyncio.Future[bool]) -> None:
            lease.extending = None
            self._extensions.discard(extended)
            ok = False
            refused = False
            if attempt.cancelled():
                log.warning("quota lease %s: the slab's transaction was cancelled", lease.id)
            elif isinstance(attempt.exception(), StorageUnavailable):
                pass  # the outage is logged once by the storage
            elif (error := attempt.exception()) is not None:
                log.warning("quota lease %s: the slab could not be taken (%s); calls hold their own rows",
                            lease.id, error)
            else:
                ok = attempt.result()
                refused = not ok
            if ok:
                lease.slab = slab
                if self._leases.get(lease.key.id) is lease:
                    lease.available += slab
                else:  # the lease was returned while its slab was being taken
                    self._give_back(lease, slab)
            elif refused and slab > base and self._leases.get(lease.key.id) is lease:
                # The room does not take the waiting calls' share: the plain slab, which it may.
                self._extend(lease, amount_nano, for_waiting=False)
                assert lease.extending is not None
                lease.extending.add_done_callback(lambda plain: _pass_on(plain, extended))
                return
            else:
                lease.refused_until = time.monotonic() + REFUSED_RETRY_S
            extended.set_result(ok)

        attempt.add_done_callback(done)
