"""The batch writer: settlements and request logs queued by the request path, committed in one
storage transaction every ``flush_interval_s`` (or at once when ``batch_max`` are waiting).

A failed commit is never dropped silently. While the database is unavailable (a probe write
fails too) the batch is retried with exponential backoff, logged each time, for as long as it
takes. When the database works but refuses the batch, the batch is split until the refused item is
alone; that item is written with its request log scrubbed, else without the log, else given up
with an error that names it, so one bad item cannot hold back the others.

Refusals (calls refused before any money was held: a bad key, a bad body, an unknown model) come
in by ``put_refusal`` into a queue of their own, bounded by ``refusals_max``: each batch takes up
to ``batch_max`` of them beside up to ``batch_max`` settlements, so a flood of unauthenticated
refusals neither grows memory without bound nor holds the money back. A refusal that finds its
queue full is not written (its access-log line still is) and is counted in ``refusals_dropped``
(``gateway_refusal_logs_dropped_total``), with one WARNING per flood.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable

import msgspec

from gateway.accounts.records import RequestLog
from gateway.storage.base import Storage, StorageUnavailable
from gateway.storage.rows import Settlement

log = logging.getLogger(__name__)

Item = Settlement | RequestLog
_SPLIT_AFTER = 3  # failed attempts of a batch before it is split
_BACKOFF_FIRST_S = 0.05
_BACKOFF_MAX_S = 5.0
REFUSALS_MAX = 10_000  # refusal rows waiting for a batch at most (``logs.refusal_queue_max``)


def _request_id(item: Item) -> str:
    return item.reservation.request_id if isinstance(item, Settlement) else item.request_id


class BatchWriter:
    def __init__(self, storage: Storage, *, batch_max: int = 256, flush_interval_s: float = 0.005,
                 probe: Callable[[], Awaitable[object]] | None = None,
                 on_uncharged: Callable[[RequestLog], None] | None = None,
                 refusals_max: int = REFUSALS_MAX) -> None:
        """``probe`` is a cheap write that tells whether the database works at all (default: a
        read of the auth version). ``on_uncharged`` is told, once committed, of each settled call
        whose cost could not be charged in full."""
        if batch_max < 1:
            raise ValueError("batch_max must be at least 1")
        self._storage = storage
        self._probe = probe or storage.auth_version
        self._on_uncharged = on_uncharged
        self._batch_max = batch_max
        self._interval = flush_interval_s
        self._queue: deque[Item] = deque()
        self._queued = 0  # items ever put
        self._committed = 0  # items ever handled: committed, or given up loudly (in queue order)
        self._waiters: list[tuple[tuple[int, int], asyncio.Future[None]]] = []
        self._wake = asyncio.Event()  # something is queued
        self._hurry = asyncio.Event()  # commit now: batch full, flush or stop
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._written: set[int] = set()  # ids of the current batch's items already committed
        # Refusal rows, in a queue of their own with its own counters (see the module docstring).
        self._refusals: deque[RequestLog] = deque()
        self._refusals_max = max(refusals_max, 0)
        self._refusals_queued = 0
        self._refusals_committed = 0
        self.refusals_dropped = 0
        self._dropping = False  # a flood is being dropped (warned once until the queue has room)

    @property
    def pending(self) -> int:
        return len(self._queue) + len(self._refusals)

    @property
    def behind(self) -> bool:
        """Something put is not committed yet (queued, or in the batch being written)."""
        return self._committed < self._queued or self._refusals_committed < self._refusals_queued

    def put_refusal(self, entry: RequestLog) -> bool:
        """Queue the request log of a refused call; False (counted, not written) when the refusal
        queue is full."""
        if len(self._refusals) >= self._refusals_max:
            self.refusals_dropped += 1
            if not self._dropping:
                self._dropping = True
                log.warning("refusal log queue full (%d rows): refusals are not written to the request "
                            "log until it drains (counted in gateway_refusal_logs_dropped_total)",
                            self._refusals_max)
            return False
        self._dropping = False
        self._refusals.append(entry)
        self._refusals_queued += 1
        self._wake.set()
        if len(self._refusals) >= self._batch_max:
            self._hurry.set()
        return True

    def put(self, item: Item) -> None:
        self._queue.append(item)
        self._queued += 1
        self._wake.set()
        if len(self._queue) >= self._batch_max:
            self._hurry.set()

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self._run(), name="meter-batch-writer")

    def _done(self, target: tuple[int, int]) -> bool:
        return self._committed >= target[0] and self._refusals_committed >= target[1]

    async def flush(self) -> None:
        """Return once everything put so far is committed."""
        target = (self._queued, self._refusals_queued)
        if self._done(target):
            return
        if self._task is None:  # not running: commit here
            await self._drain_all()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        self._hurry.set()
        await future

    async def stop(self, timeout_s: float = 30.0) -> None:
        """Commit what is queued and end the task. If the database stays unreachable past
        ``timeout_s``, give up and log every request id whose settlement was not written (their
        reservations are released by the orphan sweeper of the next start)."""
        if self._task is None:
            return
        self._stopping = True
        self._hurry.set()
        self._wake.set()
        task, self._task = self._task, None
        try:
            await asyncio.wait_for(task, timeout_s)
        except TimeoutError:
            lost = [_request_id(i) for i in self._queue]
            if self._refusals:
                log.error("meter stopped with %d refusal logs unwritten", len(self._refusals))
            log.error("meter stopped with %d unwritten settlements/logs (request ids: %s); their "
                      "reservations will be released as crash_released at the next start",
                      len(lost), ", ".join(lost))
            for _, future in self._waiters:
                if not future.done():
                    future.set_exception(RuntimeError("meter stopped before the ledger was written"))
            self._waiters.clear()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if not self._queue and not self._refusals:
                self._wake.clear()
                if self._stopping:
                    return
                continue
            if not self._hurry.is_set() and not self._stopping:
                # asyncio.timeout, not wait_for: no task made for each wait (one per flush)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._interval):
                        await self._hurry.wait()
            await self._commit_next()

    async def _drain_all(self) -> None:
        while self._queue or self._refusals:
            await self._commit_next()

    async def _commit_next(self) -> None:
        batch = [self._queue.popleft() for _ in range(min(len(self._queue), self._batch_max))]
        refused: list[Item] = [self._refusals.popleft()
                               for _ in range(min(len(self._refusals), self._batch_max))]
        if not self._queue and not self._refusals:
            self._hurry.clear()
        self._written.clear()
        try:
            await self._commit(batch + refused)
        except BaseException:  # cancelled (stop timed out): keep what is unwritten for the report
            self._queue.extendleft(reversed([i for i in batch if id(i) not in self._written]))
            self._refusals.extendleft(reversed([i for i in refused if id(i) not in self._written
                                                and isinstance(i, RequestLog)]))
            raise
        self._committed += len(batch)
        self._refusals_committed += len(refused)
        still_waiting = []
        for target, future in self._waiters:
            if self._done(target):
                if not future.done():
                    future.set_result(None)
            else:
                still_waiting.append((target, future))
        self._waiters = still_waiting

    async def _commit(self, batch: list[Item], *, suspect: bool = False) -> None:
        """Commit ``batch``, retrying while the database is unavailable. Once a probe shows the
        database itself works, the batch is what fails: split it until the rejected item is alone,
        then write that one in a degraded form (``_commit_rejected``)."""
        delay = _BACKOFF_FIRST_S
        failures = 0
        while True:
            try:
                await self._settle(batch)
                return
            except StorageUnavailable:  # the outage is logged once by the storage; nothing is lost
                failures += 1
                if failures == 1:
                    log.warning("ledger write of %d settlements/logs waits for the database", len(batch))
            except Exception:
                failures += 1
                log.exception("ledger write of %d settlements/logs failed (attempt %d)", len(batch), failures)
            if (suspect or failures >= _SPLIT_AFTER) and await self._database_ok():
                if len(batch) == 1:
                    await self._commit_rejected(batch[0])
                    return
                half = len(batch) // 2
                await self._commit(batch[:half], suspect=True)
                await self._commit(batch[half:], suspect=True)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)

    async def _settle(self, batch: list[Item]) -> None:
        settlements = [i for i in batch if isinstance(i, Settlement)]
        logs = [i for i in batch if not isinstance(i, Settlement)]
        await self._storage.settle_many(settlements, logs)
        self._written.update(id(i) for i in batch)
        if self._on_uncharged is not None:
            for s in settlements:
                if s.log is not None and s.log.uncharged_nano > 0:
                    self._on_uncharged(s.log)

    async def _database_ok(self) -> bool:
        try:
            await self._probe()
        except StorageUnavailable:
            return False
        except Exception:
            log.warning("database probe failed: waiting for the database", exc_info=True)
            return False
        return True

    async def _commit_rejected(self, item: Item) -> None:
        """The database works but refuses this item: write it with its log scrubbed (strings made
        valid UTF-8 without NUL, numbers clamped to the column ranges), then without its log (the
        money must land), else give up on it loudly: its reservation stays open until the meter's
        shutdown or an orphan sweep releases it (in full)."""
        log_entry = item.log if isinstance(item, Settlement) else item
        tries: list[Item] = []
        if log_entry is not None:
            tries.append(msgspec.structs.replace(item, log=scrubbed(log_entry))
                         if isinstance(item, Settlement) else scrubbed(log_entry))
        if isinstance(item, Settlement) and item.log is not None:
            tries.append(msgspec.structs.replace(item, log=None))
        for attempt in tries:
            try:
                await self._settle([attempt])
            except Exception:
                log.exception("degraded ledger write of %s failed", _request_id(item))
                continue
            self._written.add(id(item))
            log.error("wrote %s only in a degraded form (%s); its request log: %s", _request_id(item),
                      "log scrubbed" if attempt is tries[0] else "log dropped", _describe(log_entry))
            return
        if isinstance(item, Settlement):
            log.error("gave up writing the settlement of %s (charge %d nano): the database refuses it; its "
                      "reservation stays open until this process's shutdown or the orphan sweeper "
                      "releases it; request log: %s",
                      item.reservation.request_id, item.charge_nano, _describe(log_entry))
        else:
            log.error("gave up writing the request log %s: the database refuses it", _describe(log_entry))


def _describe(entry: RequestLog | None) -> str:
    return "none" if entry is None else msgspec.json.encode(scrubbed(entry)).decode()


_INT32_FIELDS = frozenset({"status", "attempts"})
_INT32 = 2**31 - 1
_INT64 = 2**63 - 1


def scrubbed(entry: RequestLog) -> RequestLog:
    """``entry`` with every value made storable."""
    changes: dict[str, object] = {}
    for name in RequestLog.__struct_fields__:
        value = getattr(entry, name)
        if isinstance(value, str):
            changes[name] = value.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")[:2000]
        elif isinstance(value, int) and not isinstance(value, bool):
            bound = _INT32 if name in _INT32_FIELDS else _INT64
            changes[name] = max(-bound, min(value, bound))
        elif isinstance(value, float) and not math.isfinite(value):
            changes[name] = time.time() if name == "created_at" else 0.0
    return msgspec.structs.replace(entry, **changes)
