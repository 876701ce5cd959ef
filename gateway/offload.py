"""CPU-heavy work on large request bodies, off the event loop and within a memory budget.

Decoding a 30 MB translated body into canonical form, or estimating its tokens, takes seconds of
pure Python; on the event loop that freezes every other request (``/healthz`` included) for as
long. ``off_loop(request, nbytes, fn)`` runs ``fn`` inline for a small body (a thread hop costs
more than the work) and in the app's one body-work thread for a large one, so the loop keeps
serving: the GIL is handed back to it every ``sys.getswitchinterval()`` while the worker runs
Python code. (A collection of the cyclic GC, which a body of hundreds of thousands of messages
triggers, still holds the GIL for its whole length: that part of a stall remains.)

Threads share the process's memory, and a decoded body is several times its size, so large work
is also admitted against a byte budget (``BodyWorkBudget``, one per app, sized from
``limits.json_body_bytes``): at most a few maximal bodies are being worked on at once, the rest
wait their turn (cancellable, so a client that leaves frees its place). A body larger than the
whole budget still runs, alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")

INLINE_BYTES = 256 * 1024  # below this the work is done on the loop (well under a millisecond)
BUDGET_BODIES = 2  # maximal bodies worked on at once


class BodyWorkBudget:
    """A byte budget. ``acquire(n)`` waits until ``n`` more bytes fit; ``release(n)`` gives them
    back (a plain call, so that a worker thread's completion callback can release)."""

    def __init__(self, total_bytes: int) -> None:
        self.total = max(total_bytes, 1)
        self.used = 0
        self._waiters: list[asyncio.Future[None]] = []
        # One worker: each CPU-bound thread takes the GIL for a switch interval at a time, and
        # the event loop, which needs it several times per request it serves, waits behind every
        # such thread; with one, its wait stays a few milliseconds (measured, tests/hardening).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="body-work")

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    def need(self, nbytes: int) -> int:
        return min(nbytes, self.total)  # an oversized body waits for an empty budget, then runs

    async def acquire(self, need: int) -> None:
        while self.used + need > self.total:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
        self.used += need

    def release(self, need: int) -> None:
        self.used -= need
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _without_gc_pauses(fn: Callable[[], T]) -> T:
    """``fn()`` with the cyclic GC paused. Decoding a body of many small messages makes hundreds
    of thousands of objects, and each allocation-triggered collection of the old generation walks
    the whole heap holding the GIL (100+ ms in a busy process): the event loop would wait through
    each. Paused, the new objects are looked at once, young, by the next collection. Only the
    body-work thread does this, one body at a time."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return fn()
    finally:
        if paused:
            gc.enable()


def budget_for(request: Request) -> BodyWorkBudget | None:
    budget = getattr(request.app.state, "body_work_budget", None)
    return budget if isinstance(budget, BodyWorkBudget) else None


async def off_loop(request: Request, nbytes: int, fn: Callable[[], T]) -> T:
    """``fn()``, inline when ``nbytes`` is small, else in a thread within the app's budget. A
    cancelled caller (the client left) stops waiting; a thread already running finishes on its
    own and only then gives its bytes back, so the budget never undercounts."""
    if nbytes < INLINE_BYTES:
        return fn()
    budget = budget_for(request)
    if budget is None:
        return await asyncio.to_thread(fn)
    need = budget.need(nbytes)
    await budget.acquire(need)
    work = asyncio.get_running_loop().run_in_executor(budget.executor, _without_gc_pauses, fn)

    def done(task: asyncio.Future[T]) -> None:
        budget.release(need)
        if not task.cancelled():
            task.exception()  # retrieved: a caller that left must not log "never retrieved"

    work.add_done_callback(done)
    return await asyncio.shield(work)
