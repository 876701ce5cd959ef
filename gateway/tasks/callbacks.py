"""The callback sender: POSTs a task's status change to the URL its client gave (``notifyHook``,
``notify_hook``), from the gateway itself, without ever holding up the poller.

* ``send`` only queues: delivery runs in its own asyncio task, at most ``concurrency`` at once.
* Each attempt has a short timeout; a connection error, a timeout, 408, 429 or 5xx is retried with
  exponential backoff (``attempts`` in all); a 3xx (redirects are not followed) or another 4xx is
  the receiver's final word.
* Callbacks of one task leave in the order of its changes (each waits for the previous one).
* The destination is checked by the SSRF guard on every attempt, on the addresses the connection
  uses (``ssrf.GuardedResolver``; IP-literal hosts are checked here, since aiohttp does not resolve
  them).

Delivery is at most once per status change and lives in memory: a callback still being retried
when the process stops is given up (logged). The status change itself is durable, and the client
can always fetch the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging

import aiohttp

from gateway.tasks.ssrf import CallbackGuard, GuardedResolver, UnsafeDestination

__all__ = ["CallbackSender"]

log = logging.getLogger(__name__)
_RETRY_STATUS = frozenset({408, 425, 429})
_USER_AGENT = "model-gateway-callback/0.1"


class CallbackSender:
    def __init__(self, guard: CallbackGuard, *, timeout_s: float = 5.0, attempts: int = 5,
                 backoff_first_s: float = 0.5, backoff_max_s: float = 30.0, concurrency: int = 32) -> None:
        self.guard = guard
        self.timeout_s = timeout_s
        self.attempts = max(attempts, 1)
        self.backoff_first_s = backoff_first_s
        self.backoff_max_s = backoff_max_s
        self._slots = asyncio.Semaphore(concurrency)
        self._session: aiohttp.ClientSession | None = None
        self._jobs: set[asyncio.Task[None]] = set()
        self._last: dict[str, asyncio.Task[None]] = {}  # task id -> its latest callback job
        self.delivered = 0
        self.given_up = 0

    async def start(self) -> None:
        connector = aiohttp.TCPConnector(resolver=GuardedResolver(self.guard), use_dns_cache=False,
                                         limit=64, force_close=True)
        self._session = aiohttp.ClientSession(connector=connector, skip_auto_headers=("User-Agent",),
                                              timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def stop(self, grace_s: float = 2.0) -> None:
        """Let callbacks in flight finish for up to ``grace_s``, then give the rest up."""
        if self._jobs:
            _, pending = await asyncio.wait(set(self._jobs), timeout=grace_s)
            for job in pending:
                job.cancel()
            for job in pending:
                with contextlib.suppress(asyncio.CancelledError):
                    await job
            if pending:
                log.warning("%d task callbacks given up at shutdown", len(pending))
        if self._session is not None:
            await self._session.close()
            self._session = None

    def send(self, task_id: str, url: str, body: bytes) -> None:
        """Queue one callback; returns at once."""
        previous = self._last.get(task_id)
        job = asyncio.create_task(self._deliver(task_id, url, body, previous), name=f"callback-{task_id}")
        self._jobs.add(job)
        self._last[task_id] = job
        job.add_done_callback(lambda done: self._done(task_id, done))

    def _done(self, task_id: str, job: asyncio.Task[None]) -> None:
        self._jobs.discard(job)
        if self._last.get(task_id) is job:
            del self._last[task_id]

    async def idle(self) -> None:
        """Wait until no callback is queued or being retried (tests, shutdown)."""
        while self._jobs:
            await asyncio.wait(set(self._jobs))

    async def _deliver(self, task_id: str, url: str, body: bytes,
                       previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            with contextlib.suppress(BaseException):
                await asyncio.shield(previous)
        delay = self.backoff_first_s
        for attempt in range(1, self.attempts + 1):
            async with self._slots:
                outcome = await self._attempt(url, body)
            if outcome is None:
                self.delivered += 1
                return
            final, reason = outcome
            if final or attempt == self.attempts:
                self.given_up += 1
                log.warning("callback of task %s to %s given up after %d attempt(s): %s",
                            task_id, _origin(url), attempt, reason)
                return
            log.info("callback of task %s failed (%s); retrying in %.1fs", task_id, reason, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max_s)

    async def _attempt(self, url: str, body: bytes) -> tuple[bool, str] | None:
        """None when delivered, else (final, reason)."""
        assert self._session is not None, "the callback sender is not started"
        try:
            host, _ = self.guard.split(url)
            if _is_ip(host) and not self.guard.host_allowed(host):
                self.guard.check_address(host, host)
        except UnsafeDestination as exc:
            return True, str(exc)
        try:
            async with self._session.post(url, data=body, allow_redirects=False,
                                          headers={"Content-Type": "application/json",
                                                   "User-Agent": _USER_AGENT}) as resp:
                await resp.read()
                status = resp.status
        except UnsafeDestination as exc:
            return True, str(exc)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, UnsafeDestination):
                return True, str(cause)
            return False, f"{type(exc).__name__}: {exc}"
        if 200 <= status < 300:
            return None
        if status >= 500 or status in _RETRY_STATUS:
            return False, f"HTTP {status}"
        return True, f"HTTP {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _origin(url: str) -> str:
    """The URL without path or query (which may hold a client's secret)."""
    return url.split("/", 3)[2] if url.count("/") >= 2 else url
