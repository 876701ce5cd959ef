"""Callbacks: a POST of a task's status change to the URL its client gave (``notifyHook``,
``notify_hook``), sent by the gateway itself, retried with backoff, never holding up the poller.

* Queued durably: a status change and its callback are written in one transaction
  (``Storage.transition_task``, the ``task_callbacks`` outbox), so a callback is queued exactly
  once, by whichever replica's compare-and-swap won, and survives a restart.
* ``CallbackOutbox`` sends them beside the poller: it claims due callbacks under a lease (a replica
  that dies mid-send leaves a lease that expires; another sends it again, so delivery is at least
  once), at most ``concurrency`` at a time, the oldest of each task first (one task's callbacks
  leave in order). It is woken at once when this process queues one.
* ``CallbackSender.attempt`` is one delivery: a short timeout; a connection error, a timeout, 408,
  425, 429 or 5xx is retried (``attempts`` in all, exponential backoff); a 3xx (redirects are not
  followed) or another 4xx is the receiver's final word.
* The SSRF guard runs on every attempt, on the addresses the connection uses
  (``ssrf.GuardedResolver``; IP-literal hosts are checked here, since aiohttp does not resolve
  them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

import aiohttp
import msgspec

from gateway.settings.config import LimitsConfig
from gateway.storage.base import StorageUnavailable
from gateway.storage.rows import TaskCallback
from gateway.tasks.ssrf import CallbackGuard, GuardedResolver, UnsafeDestination, is_address
from gateway.upstream.client import head_limits

if TYPE_CHECKING:
    from gateway.storage.base import Storage

__all__ = ["CallbackOutbox", "CallbackSender", "Delivery"]

log = logging.getLogger(__name__)
_RETRY_STATUS = frozenset({408, 425, 429})
_USER_AGENT = "model-gateway-callback/0.1"


class Delivery(msgspec.Struct, frozen=True):
    delivered: bool
    final: bool = True  # not delivered, and not worth another try
    reason: str = ""


DELIVERED = Delivery(True)


class CallbackSender:
    """The HTTP side: one client whose resolver refuses non-public addresses."""

    def __init__(self, guard: CallbackGuard, *, timeout_s: float = 5.0,
                 limits: LimitsConfig | None = None) -> None:
        self.guard = guard
        self.timeout_s = timeout_s
        self._limits = limits or LimitsConfig()
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(resolver=GuardedResolver(self.guard), use_dns_cache=False,
                                         limit=64, force_close=True)
        self._session = aiohttp.ClientSession(
            connector=connector, skip_auto_headers=("User-Agent",), trust_env=False,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s), **head_limits(self._limits))

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The guarded session: also where a result download's redirects go (``TaskHttp.open``)."""
        assert self._session is not None, "the callback sender is not started"
        return self._session

    async def attempt(self, url: str, body: bytes) -> Delivery:
        """One delivery attempt of ``body`` to ``url``."""
        assert self._session is not None, "the callback sender is not started"
        try:
            host, _ = self.guard.split(url)
            if is_address(host) and not self.guard.host_allowed(host):
                self.guard.check_address(host, host)
        except UnsafeDestination as exc:
            return Delivery(False, True, str(exc))
        try:
            async with self._session.post(url, data=body, allow_redirects=False,
                                          headers={"Content-Type": "application/json",
                                                   "User-Agent": _USER_AGENT}) as resp:
                await resp.read()
                status = resp.status
        except UnsafeDestination as exc:
            return Delivery(False, True, str(exc))
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, UnsafeDestination):
                return Delivery(False, True, str(cause))
            return Delivery(False, False, f"{type(exc).__name__}: {exc}")
        if 200 <= status < 300:
            return DELIVERED
        if status >= 500 or status in _RETRY_STATUS:
            return Delivery(False, False, f"HTTP {status}")
        redirect = " (redirects are not followed)" if 300 <= status < 400 else ""
        return Delivery(False, True, f"HTTP {status}{redirect}")


class CallbackOutbox:
    """Sends the queued callbacks of the ``task_callbacks`` outbox (see the module docstring)."""

    def __init__(self, storage: Storage, sender: CallbackSender, owner: str, *, attempts: int = 5,
                 backoff_first_s: float = 0.5, backoff_max_s: float = 60.0, concurrency: int = 32,
                 lease_s: float = 30.0, tick_s: float = 1.0) -> None:
        self.storage = storage
        self.sender = sender
        self.owner = owner
        self.attempts = max(attempts, 1)
        self.backoff_first_s = backoff_first_s
        self.backoff_max_s = backoff_max_s
        self.concurrency = concurrency
        self.lease_s = lease_s
        self.tick_s = tick_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.delivered = 0
        self.given_up = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="task-callbacks")

    async def stop(self) -> None:
        """Stop sending; what is still queued stays queued (sent after a restart or by a peer)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.storage.release_callback_leases(self.owner)

    def wake(self) -> None:
        """Something was queued: look now rather than at the next tick."""
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                claimed = await self.run_once()
            except StorageUnavailable:  # logged once per outage by the storage
                claimed = 0
            except Exception:
                log.exception("callback outbox cycle failed; retrying")
                claimed = 0
            if claimed:
                continue  # more may be due (the next of a task whose earlier one just left)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.tick_s)
            self._wake.clear()

    async def run_once(self) -> int:
        """Send what is due now; returns how many callbacks were tried."""
        due = await self.storage.claim_task_callbacks(time.time(), self.concurrency, self.owner, self.lease_s)
        if due:
            await asyncio.gather(*(self._send(callback) for callback in due))
        return len(due)

    async def _send(self, callback: TaskCallback) -> None:
        outcome = await self.sender.attempt(callback.url, callback.body.encode())
        tries = callback.attempts + 1
        if outcome.delivered:
            self.delivered += 1
            await self.storage.finish_task_callback(callback.id)
            return
        if outcome.final or tries >= self.attempts:
            self.given_up += 1
            log.warning("callback of task %s to %s given up after %d attempt(s): %s",
                        callback.task_id, _origin(callback.url), tries, outcome.reason)
            await self.storage.finish_task_callback(callback.id)
            return
        delay = min(self.backoff_first_s * 2 ** (tries - 1), self.backoff_max_s)
        log.info("callback of task %s failed (%s); retrying in %.1fs", callback.task_id, outcome.reason,
                 delay)
        await self.storage.retry_task_callback(callback.id, tries, time.time() + delay)


def _origin(url: str) -> str:
    """The URL without path or query (which may hold a client's secret)."""
    return url.split("/", 3)[2] if url.count("/") >= 2 else url
