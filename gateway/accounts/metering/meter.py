"""The charging flow of a metered call: reserve the worst case before the upstream is called,
settle the actual cost (or release) when the call ends.

Policy
------
* ``reserve`` is on the request path and waits for the database commit: a call never reaches an
  upstream on a hold that is not durable. The storage does it as one conditional transaction
  (user balance and key ceiling; see ``gateway.storage.base``); the SQL backends group concurrent
  reserves into one transaction, each evaluated on its own. With ``from_lease`` the hold is
  carved in memory from a durable slab of the key's room that this process holds
  (``quota_leases.py``), and only the slab's top-ups wait for a commit.
* ``finish`` never waits: the settlement (the actual charge; above the reservation, the excess is
  taken at commit from what the key's ceiling and the user's balance still allow, and the rest
  recorded as ``uncharged``, see ``gateway.storage.sql_money.book_closures``) and the request log
  are queued and committed by the batch writer (``writer.py``) in one transaction every
  ``flush_interval_s`` or when ``batch_max`` are waiting. A database outage is retried with
  backoff and logged; an item the database refuses is isolated and written in a degraded form
  (see ``writer.py``); nothing is dropped silently.
* Crash safety: a process killed with -9 loses at most the settlements queued in its last few
  milliseconds. Their reservations are still open in the database under the dead process's
  instance id; every process sends a heartbeat every ``heartbeat_s`` and runs an orphan sweeper
  (at start, then every ``stale_after_s / 2``) that releases, in full and logged as
  ``crash_released``, the reservations of instances silent for ``stale_after_s``. So balances
  always equal the ledger and nothing stays reserved; the lost calls are simply not charged.
  A process also releases, at start, any reservation left under its own instance id, so
  ``instance_id`` must be unique per running process (e.g. a uuid).
* A database outage is no crash: every process was as silent as its peers while it lasted. So a
  sweep first writes this process's own heartbeat (no sweep when that fails), and none runs until
  ``stale_after_s`` after this process last saw the database come back (its heartbeats failing, or
  any of its statements), time for every live peer to have written one again.
* Durable holds (``reserve(..., durable=True)``, media tasks): held under ``DURABLE_HOLDER``
  instead of the process's id, so a task accepted by one process can be charged or refunded by
  another after a restart. They are closed by the task's own compare-and-swap transition, never by
  the sweeper or ``stop``; a task that never reached its upstream is failed (and its hold
  released) by the task poller.
* Graceful ``stop`` flushes the queue, then releases whatever this process still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from gateway.accounts.metering.budget_refusal import budget_refusal
from gateway.accounts.metering.quota_leases import IDLE_RETURN_S, QuotaLeases, as_shown
from gateway.accounts.metering.writer import REFUSALS_MAX, BatchWriter
from gateway.accounts.money import nano_to_usd
from gateway.accounts.records import KeyRecord, Principal, RequestLog, UserRecord
from gateway.runtime.errors import InsufficientQuota, InvalidApiKey
from gateway.storage.base import Storage, StorageUnavailable
from gateway.storage.rows import DURABLE_HOLDER, Reservation, Settlement

MAX_NANO = 2**63 - 1  # the largest amount a database column holds (about 9.2 billion USD)

logger = logging.getLogger(__name__)


class Meter:
    def __init__(self, storage: Storage, instance_id: str,
                 on_finished: Callable[[RequestLog], None] | None = None, *,
                 batch_max: int = 256, flush_interval_s: float = 0.005,
                 heartbeat_s: float = 2.0, stale_after_s: float = 10.0,
                 refusals_max: int = REFUSALS_MAX) -> None:
        self.storage = storage
        self.instance_id = instance_id
        self.on_finished = on_finished
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self._writer = BatchWriter(storage, batch_max=batch_max, flush_interval_s=flush_interval_s,
                                   probe=self._heartbeat, on_uncharged=self._uncharged,
                                   refusals_max=refusals_max)
        # Calls whose cost could not be charged in full, and how much (``gateway_uncharged_*``).
        self.uncharged_calls = 0
        self.uncharged_nano = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = False
        self._abandoned: set[asyncio.Future[bool]] = set()  # reserve attempts whose caller left
        self._leases = QuotaLeases(storage, instance_id, self._writer.put)
        self._heartbeat_failing = False
        self._heartbeat_back_at = float("-inf")  # time.monotonic() of the first heartbeat after failures

    @property
    def pending(self) -> int:
        """Settlements and logs queued but not yet committed."""
        return self._writer.pending

    # --- life cycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        released = await self.storage.release_instance_reservations(self.instance_id)
        if released:
            logger.warning("released %d reservations left by an earlier process with instance id %s",
                           released, self.instance_id)
        await self._sweep()  # writes the first heartbeat
        self._writer.start()
        self._stopped = False
        self._tasks = [
            asyncio.create_task(self._every(self.heartbeat_s, self._heartbeat), name="meter-heartbeat"),
            asyncio.create_task(self._every(self.stale_after_s / 2, self._sweep), name="meter-sweeper"),
            asyncio.create_task(self._every(IDLE_RETURN_S / 2, self._return_idle_leases),
                                name="meter-lease-returns"),
        ]

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Flush the queue (giving up, loudly, after ``timeout_s`` if the database stays down),
        stop the background tasks and release what this process still holds."""
        self._stopped = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._abandoned:
            await asyncio.wait(list(self._abandoned), timeout=timeout_s)
        await self._leases.close(timeout_s)
        await self._writer.stop(timeout_s)
        if not self._writer.pending:
            try:
                released = await asyncio.wait_for(
                    self.storage.release_instance_reservations(self.instance_id), timeout_s)
            except TimeoutError:  # the next start (or another process's sweeper) releases them
                logger.error("the database did not answer the release of this process's holds within "
                             "%gs; they are released by the next start or another process's sweep", timeout_s)
                return
            if released:
                logger.warning("released %d reservations still held at shutdown", released)

    async def flush(self, *, return_leases: bool = True) -> None:
        """Wait until everything queued so far is committed (including the release of holds made
        for callers that were cancelled while reserving), after giving back what the quota leases
        hold unused (unless ``return_leases`` is False): the database then shows every balance as
        the calls left it."""
        if return_leases:
            self._leases.return_all()
        await self._leases.moves_done()
        if self._abandoned:
            await asyncio.wait(list(self._abandoned))
        await self._writer.flush()

    async def settled(self, timeout_s: float = 2.0) -> None:
        """Read your writes: before a view of the request log or of balances, commit what this
        process has queued (the calls whose responses were already sent). The reader pays one
        group commit; the request path never waits. A database that does not answer within
        ``timeout_s`` does not hold the view: it is served from what is committed (logged). The
        quota leases give back what they hold unused, so that balances show it."""
        self._leases.return_all()
        await self._leases.moves_done(timeout_s)
        if not self._writer.behind and not self._abandoned:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.flush()), timeout_s)
        except TimeoutError:
            logger.warning("read-your-writes flush timed out after %gs; serving what is committed", timeout_s)

    async def balance_view(self, user_id: int) -> UserRecord | None:
        """A user as a view of balances shows it: read your writes (``settled``), and what quota
        leases hold of its money counted as not spent (``quota_leases.as_shown``)."""
        await self.settled()
        user = await self.storage.get_user(user_id)
        return None if user is None else (await as_shown(self.storage, [user]))[0]

    # --- the request path ------------------------------------------------------------------------
    async def reserve(self, request_id: str, principal: Principal, amount_nano: int, *,
                      durable: bool = False, from_lease: bool = False,
                      arrived: float | None = None) -> Reservation:
        """Hold ``amount_nano`` against the key's ceiling and the user's balance, or raise
        ``InsufficientQuota``. The hold is committed when this returns: a row of its own, or, with
        ``from_lease``, a part of this process's quota lease on the key when it has one or can
        take one (``quota_leases.py``; no database round trip while the lease lasts). ``arrived``
        (``time.perf_counter()`` when the call came in) lets one auth-version read serve the calls
        that arrived before it began.

        ``durable``: the hold belongs to a durable record (a media task, ``gateway.tasks``), not to
        this process: it survives this process's stop or crash (no sweeper releases it), and the
        record closes it exactly once (``Storage.transition_task``)."""
        if amount_nano < 0:
            raise ValueError("a reservation cannot be negative")
        if amount_nano > MAX_NANO:  # e.g. max_tokens = 2**70: no balance can cover it
            raise InsufficientQuota("Insufficient quota: this request may cost more than "
                                    f"${nano_to_usd(MAX_NANO):.0f}.")
        if from_lease and not durable:
            carved = await self._leases.hold(request_id, principal, amount_nano, arrived)
            if carved is not None:
                return carved
            # No slab to be had: the room is short. What this process's lease still holds unused is
            # part of that room; it goes back (committed) before the call holds a row of its own.
            if self._leases.return_key(principal.key.id):
                await self._writer.flush()
        reservation = Reservation(request_id=request_id, user_id=principal.user.id,
                                  key_id=principal.key.id, amount_nano=amount_nano,
                                  instance=DURABLE_HOLDER if durable else self.instance_id)
        # The attempt runs to its end even if this caller is cancelled (client gone), so that
        # whether a hold was made is known; one that was is then released.
        attempt = asyncio.ensure_future(self.storage.reserve(reservation))
        try:
            ok = await asyncio.shield(attempt)
        except asyncio.CancelledError:
            self._abandoned.add(attempt)
            attempt.add_done_callback(lambda done: self._release_if_held(done, reservation))
            raise
        except Exception:
            self._writer.put(Settlement(reservation, 0))  # it may have committed all the same
            raise
        if not ok:
            # The key itself may be gone or disabled (another process changed it and this one's
            # auth cache has not heard yet): say so rather than blame the quota.
            key = await self.storage.get_key(principal.key.id)
            if key is None or not key.enabled:
                raise InvalidApiKey("This API key is disabled." if key else "Incorrect API key provided.")
            user = await self.storage.get_user(principal.user.id)
            if user is None or not user.enabled:  # deleted users are not found
                raise InvalidApiKey("The account of this API key is disabled." if user
                                    else "Incorrect API key provided.")
            # A budget short for this period is a 429 until it ends (``budget_refusal``).
            raise budget_refusal(amount_nano, key, user) or InsufficientQuota(
                refusal_message(amount_nano, key, user))
        return reservation

    def name(self, hold: Reservation) -> None:
        """Give a hold carved from a quota lease a row of its own, in the background (a stream's,
        before its first byte: ``named``); a no-op for other holds."""
        self._leases.name(hold)

    async def named(self, hold: Reservation) -> None:
        """Wait until the database names ``hold`` (``name``), or knows it cannot."""
        await self._leases.named(hold)

    def finish(self, log: RequestLog, reservation: Reservation | None, charge_nano: int) -> None:
        """Queue the settlement (or only the log when nothing was reserved) and report the call to
        ``on_finished``. ``log.charge_nano`` is the cost to charge; once committed, the log holds
        what was charged and what could not be (``uncharged_nano``)."""
        if reservation is None:
            log.charge_nano = 0
            if log.status >= 400:  # refused before any hold (a rate limit): bounded like any refusal
                self._writer.put_refusal(log)
            else:
                self._writer.put(log)
        else:
            charge = log.charge_nano = min(max(charge_nano, 0), MAX_NANO)
            self._leases.settle(reservation, charge,
                                lambda hold: self._writer.put(Settlement(hold, charge, log)))
        if self._stopped:
            logger.warning("meter already stopped: settlement of %s is written only by a later flush",
                           log.request_id)
        if self.on_finished is not None:
            try:
                self.on_finished(log)
            except Exception:
                logger.exception("on_finished subscriber failed for %s", log.request_id)

    def release(self, hold: Reservation) -> None:
        """Close ``hold`` charging nothing, without a request-log row: a call that replaced it with
        a larger hold of its own (a fallback model's, ``gateway.relay.fallback``)."""
        self._leases.settle(hold, 0, lambda closing: self._writer.put(Settlement(closing, 0)))

    def refused(self, log: RequestLog) -> None:
        """Queue the request log of a call refused before anything was held (CONTRACT 6a), in the
        writer's bounded refusal queue (``writer.py``: dropped and counted when full)."""
        self._writer.put_refusal(log)

    @property
    def refusals_dropped(self) -> int:
        """Refusal rows not written because their queue was full."""
        return self._writer.refusals_dropped

    def _uncharged(self, log: RequestLog) -> None:
        self.uncharged_calls += 1
        self.uncharged_nano += log.uncharged_nano
        logger.warning("request %s (user %d, key %d) cost %d nano-USD more than could be charged: the "
                       "balance or the key's ceiling ran out; recorded as uncharged", log.request_id,
                       log.user_id, log.key_id, log.uncharged_nano)

    def _release_if_held(self, attempt: asyncio.Future[bool], reservation: Reservation) -> None:
        self._abandoned.discard(attempt)
        if attempt.cancelled() or attempt.exception() is not None or attempt.result():
            self._writer.put(Settlement(reservation, 0))  # a no-op when nothing is held

    # --- background ------------------------------------------------------------------------------
    async def _heartbeat(self) -> None:
        began = time.monotonic()
        try:
            await self.storage.heartbeat(self.instance_id)
        except Exception:
            self._heartbeat_failing = True
            raise
        # A heartbeat that failed, or took longer than the period (a database that hung: every
        # peer's waited as long), is an outage: the time it lasted is not the peers' silence.
        if self._heartbeat_failing or time.monotonic() - began > self.heartbeat_s:
            self._heartbeat_failing = False
            self._heartbeat_back_at = time.monotonic()

    def _outage_explains_silence(self) -> bool:
        """Whether the database was out of this process's reach within ``stale_after_s``: then the
        peers' silence may be that outage's too, and nobody is swept yet."""
        since_back = time.monotonic() - self._heartbeat_back_at
        outage = self.storage.outage
        if outage is not None:
            since_back = min(since_back, outage.up_for())
        return since_back < self.stale_after_s

    async def _return_idle_leases(self) -> None:
        self._leases.return_idle()

    async def _sweep(self) -> None:
        await self._heartbeat()  # this process is never stale to itself: written before any sweep
        if self._outage_explains_silence():
            return
        released = await self.storage.release_orphaned_reservations(self.stale_after_s)
        if released:
            logger.warning("released %d reservations of gateway processes silent for %gs (crash_released)",
                        released, self.stale_after_s)

    @staticmethod
    async def _every(interval_s: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except StorageUnavailable:  # logged once per outage by the storage
                pass
            except Exception:
                logger.exception("meter background job %s failed; retrying in %gs",
                              getattr(job, "__name__", job), interval_s)


def refusal_message(amount_nano: int, key: KeyRecord, user: UserRecord | None) -> str:
    """Which limit refused a reservation and what it still allows: the key's own ceiling
    (``quota_usd`` of the key) when that is what is short, else the user's balance."""
    need = f"Insufficient quota: this request may cost up to ${nano_to_usd(amount_nano):.6f}"
    if key.quota_nano is not None:
        key_left = max(key.quota_nano - key.spent_nano - key.reserved_nano, 0)
        if key_left < amount_nano:
            return (f"{need}, but the API key's spending ceiling (quota_usd "
                    f"${nano_to_usd(key.quota_nano):.6f}) allows only ${nano_to_usd(key_left):.6f} more.")
    balance = max(user.balance_nano, 0) if user is not None else 0
    return f"{need}, but the account balance allows only ${nano_to_usd(balance):.6f}."
