"""Request-log retention: raw rows older than ``logs.retain_days`` are deleted in the background.

Every ``logs.prune_interval_s`` (and once soon after start) a round deletes the oldest rows,
``logs.prune_batch`` per transaction with a short pause between two, until none older than the
cutoff is left (``Storage.prune_logs``: an hour at a time, oldest first; the roll-ups stay, so
usage over months is still answered). A transaction deletes a small batch, so SQLite's write lock
is never held for long and the metered calls' commits go on between two. With several processes
on one PostgreSQL database only the holder of the pruning lease prunes; the others find it held
and wait for their next round (a holder that died loses the lease after ``LEASE_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from gateway.settings.config import LogsConfig
from gateway.storage.base import Storage, StorageUnavailable

log = logging.getLogger(__name__)

FIRST_ROUND_S = 5.0  # after start: the first round does not compete with start-up work
PAUSE_S = 0.05  # between two batches of a round
LEASE_S = 120.0  # the pruning lease, renewed by every batch
RETENTION = "log_retention"  # its key in ``Gateway.extensions`` (for /metrics)


class LogRetention:
    def __init__(self, storage: Storage, settings: LogsConfig, holder: str) -> None:
        self.storage = storage
        self.settings = settings
        self.holder = holder  # this process's instance id
        self.deleted = 0  # rows deleted by this process (``gateway_request_log_pruned_total``)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.settings.retain_days > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="request-log-retention")

    async def stop(self) -> None:
        if self._task is None:
            return
        task, self._task = self._task, None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(Exception):  # the lease runs out on its own otherwise
            await asyncio.wait_for(self.storage.release_prune_lease(self.holder), 5.0)

    async def prune_once(self, now: float | None = None) -> int:
        """One round: delete batches until nothing older than the cutoff is left or another
        process holds the lease; returns how many rows this round deleted."""
        cutoff = (time.time() if now is None else now) - self.settings.retain_days * 86400
        deleted = 0
        while True:
            step = await self.storage.prune_logs(cutoff, self.holder, self.settings.prune_batch, LEASE_S)
            deleted += step.deleted
            self.deleted += step.deleted
            if step.done or not step.held:
                return deleted
            await asyncio.sleep(PAUSE_S)

    async def _run(self) -> None:
        await asyncio.sleep(FIRST_ROUND_S)
        while True:
            try:
                deleted = await self.prune_once()
                if deleted:
                    log.info("request log retention: deleted %d rows older than %g days", deleted,
                             self.settings.retain_days)
            except StorageUnavailable:  # logged once per outage by the storage
                pass
            except Exception:
                log.exception("request log retention failed; retrying in %gs", self.settings.prune_interval_s)
            await asyncio.sleep(self.settings.prune_interval_s)
