"""The task engine: accept a task (hold its price), follow it upstream, charge or refund it once.

One ``TaskEngine`` per app (``engine_of(gateway)``), started and stopped by the ``plugins.tasks``
plugin. A family's routes call it; its poller (``poller.py``) and callback sender
(``callbacks.py``) run beside the app.

Life of a task (every change below is one ``Storage.transition_task``: a compare-and-swap on the
task's ``version`` that, when it closes the task, closes its money hold in the same transaction):

1. ``submit``: the callback URL passes the SSRF guard (else 400 naming the field); the task row is
   written (``billing_status`` reserved, next poll only after a grace period); the price is held
   as a durable hold (``Meter.reserve(durable=True)``: it outlives this process); the upstream is
   called, failing over between candidates. Accepted: the upstream id is stored (never shown to
   the client) and the first poll is scheduled after ``tasks.poll_first_s``. Refused or
   unreachable: the task is failed and its hold released, and the client gets the error.
2. The poller claims due tasks under a lease, asks each upstream in batches (``TaskFamily.poll``)
   and applies what it learns (``apply``): a running task is asked again after
   ``tasks.poll_interval_s`` (with jitter, so tasks submitted together spread out); a succeeded one
   is charged its price (or the family's actual charge, never above the hold); a failed one, one
   the upstream no longer knows, one past ``tasks.timeout_s`` and one that never reached its
   upstream (the accepting process died mid-submit) are failed and their holds released.
3. A status change of a task with a callback URL queues its callback in the same transaction
   (the ``task_callbacks`` outbox: queued once, by whoever won the CAS; sent by ``CallbackOutbox``
   beside the poller, with retries, surviving restarts).
4. ``fetch`` answers from storage, but first refreshes a task whose last poll is older than the
   poll interval (bounded by ``refresh_timeout_s``), so a finished task is never shown stale.

Ownership: a task belongs to the user who submitted it; any other caller gets 404 (``get_owned``)
and batch reads leave it out (``fetch_many``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from gateway.accounts.ratelimit import admit_call
from gateway.accounts.records import Principal, RequestLog
from gateway.runtime.errors import GatewayError, InvalidRequest, NotFound, UpstreamError
from gateway.runtime.secrets_scrub import SecretScrubber, loggable_message
from gateway.storage.rows import DURABLE_HOLDER, Reservation, Settlement, TaskRecord
from gateway.tasks.callbacks import CallbackOutbox, CallbackSender
from gateway.tasks.family import FINAL_PHASES, Candidate, Snapshot, TaskFamily
from gateway.tasks.media import MediaLinks
from gateway.tasks.poller import Poller
from gateway.tasks.ssrf import CallbackGuard, UnsafeDestination
from gateway.tasks.submit_attempts import Send, SubmitFailed, attempts_made, send_with_failover
from gateway.tasks.upstream import TaskHttp
from gateway.upstream.attempt import UpstreamFailure
from gateway.upstream.pool import Target

if TYPE_CHECKING:
    from starlette.requests import Request

    from gateway.runtime.context import Gateway
    from gateway.settings.config import Config

__all__ = ["NewTask", "TaskEngine", "engine_of"]

log = logging.getLogger(__name__)
EXTENSION_KEY = "tasks"
TASK_CAPABILITY = "task"


class NewTask(msgspec.Struct, frozen=True):
    """What a family's submit route tells the engine about a task it wants to start."""

    family: str
    action: str  # e.g. IMAGINE, UPSCALE, generate
    status: str  # the family's status before the upstream answered (e.g. NOT_START)
    route: str  # the endpoint called (for the request log)
    request_json: str = "{}"  # the family's own record of the request (never shown as is)
    notify_hook: str | None = None  # callback URL, checked by the SSRF guard
    state: str | None = None  # client pass-through echoed in callbacks
    hook_param: str = "notifyHook"  # the field that carried the URL, named in a 400
    task_id: str = ""  # the family's id format; empty: a random hex id


def engine_of(gateway: Gateway) -> TaskEngine:
    """The app's task engine, made on first use (routes are built before the app starts)."""
    engine = gateway.extensions.get(EXTENSION_KEY)
    if engine is None:
        families: dict[str, TaskFamily] = {}
        for answer in reversed(gateway.plugins.hook.gateway_task_families()):
            for family in answer or ():
                families.setdefault(family.name, family)
        engine = gateway.extensions[EXTENSION_KEY] = TaskEngine(gateway, families)
    assert isinstance(engine, TaskEngine)
    return engine


def is_final(task: TaskRecord) -> bool:
    return task.finished_at is not None


class TaskEngine:
    def __init__(self, gateway: Gateway, families: Mapping[str, TaskFamily], *, lease_s: float = 30.0,
                 refresh_timeout_s: float = 3.0) -> None:
        self.gateway = gateway
        self.families = dict(families)
        self.settings = gateway.config.tasks
        self.lease_s = lease_s  # how long a claimed task is this process's to poll
        self.refresh_timeout_s = refresh_timeout_s
        self.guard = CallbackGuard(self.settings.callback_allowlist)
        self.sender = CallbackSender(self.guard, limits=gateway.config.limits)
        self.http = TaskHttp(gateway.upstreams, lambda: self.sender.session, self.guard)
        self.outbox = CallbackOutbox(gateway.storage, self.sender, gateway.instance_id)
        self.media = MediaLinks(gateway)
        self._poller: Poller | None = None
        self._rng = random.Random()
        # Upstream words kept on tasks (failure reasons, results) are shown to clients and callbacks.
        self.scrubber = SecretScrubber.of_config(gateway.config)

    def reconfigure(self, config: Config) -> None:
        """After a config reload: the polling pace, the time-out and the secrets kept out of
        results follow it (the callback guard's allowlist is built once: a restart changes it)."""
        self.settings = config.tasks
        self.scrubber = SecretScrubber.of_config(config)

    # --- life cycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.media.load_key()
        await self.sender.start()
        self.outbox.start()
        self._poller = Poller(self)
        self._poller.start()

    async def stop(self) -> None:
        if self._poller is not None:
            await self._poller.stop()
            self._poller = None
        await self.outbox.stop()
        await self.sender.stop()
        await self.gateway.storage.release_task_leases(self.gateway.instance_id)

    @property
    def poller(self) -> Poller:
        assert self._poller is not None, "the task engine is not started"
        return self._poller

    def family(self, name: str) -> TaskFamily:
        return self.families[name]

    def shown(self, request: Request | None, task: TaskRecord) -> TaskRecord:
        """``task`` as a client sees it: its result links the gateway's (``media.MediaLinks``)."""
        return self.media.shown(self.families.get(task.family), task, self.media.base_of(request))

    # --- choosing upstreams ----------------------------------------------------------------------
    def upstream_targets(self, protocol: str) -> list[Target]:
        """Every upstream of ``protocol`` as a target of its first model (the one it is priced
        at: CONTRACT 3b), in routing order: priority, then the pool's order (weight, cooled-down
        upstreams last)."""
        pool = self.gateway.upstreams
        found: list[Target] = []
        seen: set[str] = set()
        firsts = dict.fromkeys(next(iter(u.model_map()), "") for u in self.gateway.config.upstreams
                               if u.protocol == protocol)
        for first in firsts:
            for target in pool.targets(first, capability=TASK_CAPABILITY):
                if (target.protocol == protocol and target.name not in seen
                        and next(iter(target.upstream.model_map()), None) == first):
                    seen.add(target.name)
                    found.append(target)
        return sorted(found, key=lambda t: t.upstream.priority)

    def first_model(self, target: Target) -> str:
        return next(iter(target.upstream.model_map()))

    # --- callbacks -------------------------------------------------------------------------------
    async def check_callback(self, url: str, param: str) -> None:
        """Accept-time SSRF check of a callback URL: InvalidRequest (400) naming ``param``."""
        try:
            await self.guard.check_url(url)
        except UnsafeDestination as exc:
            raise InvalidRequest(f"Invalid value for `{param}`: {exc}.", param=param) from exc

    def _callback(self, family: TaskFamily, task: TaskRecord,
                  changes: Mapping[str, Any]) -> tuple[str, str] | None:
        """The callback (url, body) of a status change, rendered from the task as it will be
        stored, to be queued in the same transaction as the change."""
        if not task.notify_hook or changes.get("status", task.status) == task.status:
            return None
        after = msgspec.structs.replace(task, **changes)
        try:
            body = family.callback_payload(self.shown(None, after))
        except Exception:
            log.exception("callback payload of task %s failed", task.task_id)
            return None
        return None if body is None else (task.notify_hook, body.decode())

    # --- submit ----------------------------------------------------------------------------------
    async def submit(self, principal: Principal, request_id: str, new: NewTask,
                     candidates: Sequence[Candidate], send: Send) -> TaskRecord:
        """Accept a task: check its callback, hold the dearest candidate's price, hand it to the
        first candidate that answers (``send``; an ``UpstreamFailure`` moves on, any other error
        fails the task and reaches the client), and schedule its first poll."""
        await admit_call(self.gateway, principal)  # rate limits: before anything is stored or held
        if new.notify_hook:
            await self.check_callback(new.notify_hook, new.hook_param)
        if not candidates:
            raise UpstreamError(f"No upstream is configured for {new.family} tasks.")
        family = self.family(new.family)
        now = time.time()
        amount = max(c.price_nano for c in candidates)
        first = candidates[0]
        task = TaskRecord(
            task_id=new.task_id or secrets.token_hex(16), user_id=principal.user.id,
            key_id=principal.key.id, family=new.family, action=new.action, model=first.model,
            request_id=request_id, upstream=first.target.name, status=new.status,
            request_json=new.request_json, billing_status="reserved", reserved_nano=amount,
            notify_hook=new.notify_hook, state=new.state, created_at=now, updated_at=now,
            next_poll_at=now + self._submit_grace_s(candidates), price_nano=first.price_nano,
            route=new.route)
        storage = self.gateway.storage
        task = await storage.create_task(task)
        try:
            hold = await self.gateway.meter.reserve(request_id, principal, amount, durable=True)
        except GatewayError:
            await storage.delete_task(task.task_id)
            raise
        if (await self._reload(task.task_id)).finished_at is not None:
            # This process stalled past the submission grace and the poller already failed the
            # task (releasing nothing, since no hold existed yet): release the hold made since.
            await storage.settle_many([Settlement(hold, 0)])
            raise UpstreamError("The task could not be submitted in time.")
        try:
            chosen, submitted, attempt_log = await send_with_failover(
                self.gateway.upstreams, self.gateway.config.routing.max_attempts, candidates, send)
        except GatewayError as err:
            await self.fail(family, task, f"the upstream refused the task: {err.message}",
                            log_status=err.status,
                            attempt_log=err.attempt_log if isinstance(err, SubmitFailed) else None)
            raise
        except BaseException:
            await asyncio.shield(self.fail(family, task, "the task could not be submitted"))
            raise
        now = time.time()
        snap = submitted.snapshot
        changes: dict[str, Any] = {
            "upstream": chosen.target.name, "model": chosen.model, "price_nano": chosen.price_nano,
            "upstream_task_id": submitted.upstream_task_id, "polled_at": now, "attempt_log": attempt_log,
        }
        done = await self._apply(family, task, snap, now, extra=changes, first_poll=True)
        return done or await self._reload(task.task_id)

    def _submit_grace_s(self, candidates: Sequence[Candidate]) -> float:
        """How long a task may wait for its upstream id before the poller declares the submission
        lost (the accepting process died): the longest the submission itself may take, plus slack."""
        tries = max(self.gateway.config.routing.max_attempts, 1)
        longest = max(c.target.upstream.timeouts.connect_s + c.target.upstream.timeouts.first_byte_s
                      for c in candidates)
        return longest * tries + 30.0

    async def _reload(self, task_id: str) -> TaskRecord:
        task = await self.gateway.storage.get_task(task_id)
        if task is None:
            raise NotFound("The task does not exist.")
        return task

    # --- reading ---------------------------------------------------------------------------------
    async def get_owned(self, principal: Principal, family: str, task_id: str) -> TaskRecord:
        """The caller's task of ``family``; 404 for an unknown id and for anyone else's task."""
        task = await self.gateway.storage.get_task(task_id) if task_id else None
        if task is None or task.user_id != principal.user.id or task.family != family:
            raise NotFound(f"The task `{task_id}` does not exist.", code="task_not_found")
        return task

    async def fetch(self, principal: Principal, family: str, task_id: str) -> TaskRecord:
        """``get_owned``, refreshed from the upstream first when its last poll is stale."""
        task = await self.get_owned(principal, family, task_id)
        return (await self.refresh([task]))[0]

    async def fetch_many(self, principal: Principal, family: str,
                         task_ids: Sequence[str]) -> list[TaskRecord]:
        """The caller's tasks among ``task_ids``, in the order asked (unknown and other users'
        ids left out, repeats once), each refreshed like ``fetch``."""
        stored = {t.task_id: t for t in await self.gateway.storage.tasks_by_ids(task_ids)}
        mine = [stored[i] for i in dict.fromkeys(task_ids)
                if i in stored and stored[i].user_id == principal.user.id and stored[i].family == family]
        return await self.refresh(mine)

    def is_stale(self, task: TaskRecord, now: float) -> bool:
        if is_final(task) or not task.upstream_task_id:
            return False
        return (task.polled_at or task.created_at) + self.settings.poll_interval_s <= now

    async def refresh(self, tasks: Sequence[TaskRecord]) -> list[TaskRecord]:
        """``tasks`` with the stale ones asked upstream first (within ``refresh_timeout_s``; on
        any failure the stored state is shown)."""
        now = time.time()
        stale = [t for t in tasks if self.is_stale(t, now) and t.family in self.families]
        if not stale:
            return list(tasks)
        fresh: dict[str, TaskRecord] = {}
        try:
            async with asyncio.timeout(self.refresh_timeout_s):
                for task in await self.poller.poll_now(stale):
                    fresh[task.task_id] = task
        except (TimeoutError, GatewayError, UpstreamFailure) as exc:
            log.info("refresh of %d task(s) on fetch failed: %s", len(stale), exc)
        return [fresh.get(t.task_id, t) for t in tasks]

    # --- transitions -----------------------------------------------------------------------------
    async def apply(self, family: TaskFamily, task: TaskRecord, snap: Snapshot | None,
                    now: float) -> TaskRecord | None:
        """Record what a poll learned: ``snap`` None means the upstream no longer knows the task.
        None when another writer changed the task first (its change wins)."""
        if is_final(task):
            return task
        if snap is None:
            return await self.fail(family, task, "the upstream no longer knows this task")
        return await self._apply(family, task, snap, now, extra={"polled_at": now})

    async def reschedule(self, task: TaskRecord, now: float) -> TaskRecord | None:
        """Nothing learned (the upstream could not be asked): ask again after the interval."""
        if is_final(task):
            return task
        family = self.families.get(task.family)
        if family is not None and now >= task.created_at + self.settings.timeout_s:
            return await self.fail(family, task, "the task timed out")
        return await self.gateway.storage.transition_task(
            task.task_id, task.version, {"next_poll_at": now + self._interval()})

    async def fail(self, family: TaskFamily, task: TaskRecord, reason: str, *,
                   log_status: int = 200, attempt_log: str | None = None) -> TaskRecord | None:
        """End ``task`` as failed and release its hold (once: a lost CAS changes nothing);
        ``attempt_log``: the submission's failed attempts, when it never reached an upstream."""
        if is_final(task):
            return task
        snap = Snapshot(status=family.failure_status, phase="failed", progress=task.progress,
                        fail_reason=reason)
        extra = {"attempt_log": attempt_log} if attempt_log else {}
        return await self._apply(family, task, snap, time.time(), extra=extra, log_status=log_status)

    def _interval(self, first: bool = False) -> float:
        base = self.settings.poll_first_s if first else self.settings.poll_interval_s
        return max(base, 0.01) * self._rng.uniform(0.9, 1.1)

    async def _apply(self, family: TaskFamily, task: TaskRecord, snap: Snapshot, now: float, *,
                     extra: Mapping[str, Any], first_poll: bool = False,
                     log_status: int = 200) -> TaskRecord | None:
        changes: dict[str, Any] = {**extra, "status": snap.status, "progress": snap.progress}
        if snap.result_json is not None:
            changes["result_json"] = self.scrubber.scrub(snap.result_json)
        if snap.phase in ("running", "succeeded") and task.started_at is None:
            changes["started_at"] = now
        settlement: Settlement | None = None
        if snap.phase in FINAL_PHASES:
            changes["finished_at"] = now
            changes["next_poll_at"] = None
            succeeded = snap.phase == "succeeded"
            price = int(extra.get("price_nano", task.price_nano))
            charge = min(max(snap.charge_nano if snap.charge_nano is not None else price, 0),
                         task.reserved_nano) if succeeded else 0
            if not succeeded:
                changes["fail_reason"] = self.scrubber.scrub(snap.fail_reason or "the task failed")
            if task.billing_status == "reserved":
                changes["billing_status"] = "charged" if succeeded else "refunded"
                changes["charged_nano"] = charge
                key = await self.gateway.storage.get_key(task.key_id)
                settlement = self._settlement(task, charge, succeeded, changes, now, log_status,
                                              key.name if key is not None else "")
        elif now >= task.created_at + self.settings.timeout_s:
            return await self.fail(family, task, "the task timed out")
        else:
            changes["next_poll_at"] = now + self._interval(first=first_poll)
        callback = self._callback(family, task, changes)
        new = await self.gateway.storage.transition_task(task.task_id, task.version, changes, settlement,
                                                         callback)
        if new is None:
            return None
        if callback is not None:
            self.outbox.wake()
        if settlement is not None and settlement.log is not None:
            self.gateway.plugins.hook.gateway_request_finished(gateway=self.gateway, log=settlement.log)
        return new

    def _settlement(self, task: TaskRecord, charge: int, succeeded: bool, changes: Mapping[str, Any],
                    now: float, status: int, token_name: str) -> Settlement:
        reservation = Reservation(request_id=task.request_id, user_id=task.user_id, key_id=task.key_id,
                                  amount_nano=task.reserved_nano, instance=DURABLE_HOLDER)
        attempt_log = changes.get("attempt_log", task.attempt_log)
        submitted = bool(changes.get("upstream_task_id", task.upstream_task_id))
        record = RequestLog(
            request_id=task.request_id, created_at=task.created_at, user_id=task.user_id,
            key_id=task.key_id, token_name=token_name, route=task.route, family=task.family,
            model=str(changes.get("model", task.model)), status=200 if succeeded else status,
            outcome="success" if succeeded else ("client_error" if 400 <= status < 500 else "upstream_error"),
            upstream=str(changes.get("upstream", task.upstream)) or None,
            attempts=attempts_made(attempt_log, submitted=submitted),
            charge_nano=charge, use_time_ms=int((now - task.created_at) * 1000),
            error_code=None if succeeded else "task_failed", attempt_log=attempt_log,
            error_message=None if succeeded else loggable_message(changes.get("fail_reason"), self.scrubber))
        return Settlement(reservation, charge, record)
