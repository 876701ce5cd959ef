"""The poller: follows every unfinished task until it ends, in batches, across restarts.

Each cycle claims up to ``claim_limit`` due tasks (``next_poll_at`` passed) under a lease
(``Storage.claim_due_tasks``): one replica polls a task at a time, and a replica that died leaves
leases that expire after ``TaskEngine.lease_s``, when another takes its tasks over. Tasks live in
the database, so a restarted gateway simply finds them due.

The claimed tasks are grouped by family and upstream and asked about ``TaskFamily.poll_batch`` at
a time (a list-by-condition query where the upstream has one), several groups at once; what comes
back is applied through ``TaskEngine.apply`` (a compare-and-swap per task). A task that never got
an upstream id (its submission was lost with its process), whose upstream is no longer configured,
or whose family is no longer installed is failed and refunded rather than left to hang. The cycle
sleeps ``tick_s`` when nothing more is due; a full claim goes on at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Protocol

from gateway.runtime.context import Gateway
from gateway.runtime.errors import GatewayError
from gateway.settings.config import TasksConfig
from gateway.storage.base import StorageUnavailable
from gateway.storage.rows import TaskRecord
from gateway.tasks.family import Snapshot, TaskFamily
from gateway.tasks.upstream import TaskHttp
from gateway.upstream.attempt import UpstreamFailure

__all__ = ["PolledEngine", "Poller"]

log = logging.getLogger(__name__)


class PolledEngine(Protocol):
    """What the poller asks of the task engine (``gateway.tasks.engine.TaskEngine``, which starts
    it): where the tasks are and the transitions a poll's answer leads to."""

    @property
    def gateway(self) -> Gateway: ...

    @property
    def families(self) -> Mapping[str, TaskFamily]: ...

    @property
    def settings(self) -> TasksConfig: ...

    @property
    def lease_s(self) -> float: ...

    @property
    def http(self) -> TaskHttp: ...

    async def apply(self, family: TaskFamily, task: TaskRecord, snap: Snapshot | None,
                    now: float) -> TaskRecord | None: ...

    async def reschedule(self, task: TaskRecord, now: float) -> TaskRecord | None: ...

    async def fail(self, family: TaskFamily, task: TaskRecord, reason: str, *,
                   log_status: int = 200) -> TaskRecord | None: ...


class Poller:
    def __init__(self, engine: PolledEngine, *, claim_limit: int = 200, concurrency: int = 8) -> None:
        self.engine = engine
        settings = engine.settings
        # Often enough that a task is asked about close to when it is due, never a busy loop.
        self.tick_s = min(max(min(settings.poll_first_s, settings.poll_interval_s) / 4, 0.02), 1.0)
        self.claim_limit = claim_limit
        self._groups = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self.cycles = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="task-poller")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                claimed = await self.cycle()
            except StorageUnavailable:  # logged once per outage by the storage
                claimed = 0
            except Exception:
                log.exception("task poller cycle failed; retrying")
                claimed = 0
            if claimed < self.claim_limit:
                await asyncio.sleep(self.tick_s)

    async def cycle(self) -> int:
        """Claim what is due and poll it; returns how many tasks were claimed."""
        engine = self.engine
        now = time.time()
        storage, owner = engine.gateway.storage, engine.gateway.instance_id
        tasks = await storage.claim_due_tasks(now, self.claim_limit, owner, engine.lease_s)
        self.cycles += 1
        if tasks:
            await self._poll(tasks, now)
        return len(tasks)

    async def poll_now(self, tasks: Sequence[TaskRecord]) -> list[TaskRecord]:
        """Poll ``tasks`` at once, without a lease (a client's fetch); returns them as stored
        afterwards (a task whose CAS another writer won is read back)."""
        await self._poll(tasks, time.time())
        found = await self.engine.gateway.storage.tasks_by_ids([t.task_id for t in tasks])
        by_id = {t.task_id: t for t in found}
        return [by_id.get(t.task_id, t) for t in tasks]

    async def _poll(self, tasks: Sequence[TaskRecord], now: float) -> None:
        groups: dict[tuple[str, str], list[TaskRecord]] = defaultdict(list)
        for task in tasks:
            groups[(task.family, task.upstream)].append(task)
        await asyncio.gather(*(self._poll_group(family, upstream, group, now)
                               for (family, upstream), group in groups.items()))

    async def _poll_group(self, family_name: str, upstream_name: str, tasks: list[TaskRecord],
                          now: float) -> None:
        engine = self.engine
        family = engine.families.get(family_name)
        if family is None:
            log.warning("%d task(s) of family %s, which is not installed: asked again later",
                        len(tasks), family_name)
            for task in tasks:
                await engine.reschedule(task, now)
            return
        upstream = next((u for u in engine.gateway.config.upstreams if u.name == upstream_name), None)
        live: list[TaskRecord] = []
        for task in tasks:
            if not task.upstream_task_id:
                await engine.fail(family, task, "the task never reached its upstream")
            elif upstream is None:
                await engine.fail(family, task, f"the upstream {upstream_name} is no longer configured")
            elif now >= task.created_at + engine.settings.timeout_s:
                await engine.fail(family, task, "the task timed out")
            else:
                live.append(task)
        if not live or upstream is None:
            return
        size = max(family.poll_batch, 1)
        async with self._groups:
            for i in range(0, len(live), size):
                await self._poll_batch(family, upstream_name, live[i:i + size], now)

    async def _poll_batch(self, family: TaskFamily, upstream_name: str, batch: list[TaskRecord],
                          now: float) -> None:
        engine = self.engine
        upstream = next(u for u in engine.gateway.config.upstreams if u.name == upstream_name)
        try:
            snapshots = await family.poll(engine.http, upstream, batch)
        except (UpstreamFailure, GatewayError) as exc:
            log.info("polling %d %s task(s) on %s failed (%s): asked again later",
                     len(batch), family.name, upstream_name, exc)
            for task in batch:
                await engine.reschedule(task, now)
            return
        except Exception:
            # A bug in a family's poll must not stall every other task: logged, asked again later.
            log.exception("family %s failed polling %d task(s) on %s", family.name, len(batch), upstream_name)
            for task in batch:
                await engine.reschedule(task, now)
            return
        answered = time.time()
        for task in batch:
            await engine.apply(family, task, snapshots.get(task.upstream_task_id), answered)
