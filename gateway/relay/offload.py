"""CPU-heavy work on large request bodies, off the event loop and within a memory budget.

Decoding a 30 MB translated body into canonical form, or estimating its tokens, takes seconds of
pure Python; on the event loop that freezes every other request (``/healthz`` included) for as
long. ``off_loop(request, nbytes, fn)`` runs ``fn`` inline for a small body (a thread hop costs
more than the work) and in the app's one body-work thread for a large one, so the loop keeps
serving: the GIL is handed back to it every ``sys.getswitchinterval()`` while the worker runs
Python code, and sooner while body work runs (``tuning.BusySwitchInterval``). The cyclic GC is
paused in the worker (``tuning.without_gc_pauses``), whose allocations would otherwise trigger
collections that walk the whole heap holding the GIL.

Threads share the process's memory, and a decoded body is several times its size, so large work
is also admitted against a byte budget (``BodyWorkBudget``, one per app, sized from
``limits.json_body_bytes``): at most a few maximal bodies are being worked on at once, the rest
wait their turn (cancellable, so a client that leaves frees its place). A body larger than the
whole budget still runs, alone.

Size is not the only measure: 29 MB of 900,000 tiny messages takes twenty times the decoding time
and memory of 29 MB of one long text, and a decoder holds the GIL for its whole run, which no
thread can hide. So a JSON body is also limited in elements (array items and object members,
``limits.json_max_elements``): ``read_json_body`` tallies an upper bound as the chunks arrive
(``gateway.wire.json_shape``), and only a body whose bound is over the limit is counted exactly,
in the app's body process (``off_process``, ``gateway.relay.body_process``), whose time and memory the
serving process never sees. A body over the limit is refused (400) before anything decodes it here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from starlette.requests import Request

from gateway.relay.body_process import BodyProcess, ChildFailed
from gateway.runtime import tuning
from gateway.runtime.errors import InvalidRequest
from gateway.wire.json_shape import count_elements

T = TypeVar("T")
logger = logging.getLogger(__name__)

INLINE_BYTES = 256 * 1024  # below this the work is done on the loop (well under a millisecond)
BUDGET_SCOPE_KEY = "gateway.body_work"  # the app's BodyWorkBudget, set by EdgeMiddleware
BUDGET_BODIES = 2  # maximal bodies worked on at once


class BodyWorkBudget:
    """A byte budget. ``acquire(n)`` waits until ``n`` more bytes fit; ``release(n)`` gives them
    back (a plain call, so that a worker thread's completion callback can release)."""

    def __init__(self, total_bytes: int, max_elements: int = 2**62) -> None:
        self.total = max(total_bytes, 1)
        self.max_elements = max_elements
        self.process = BodyProcess()
        self.used = 0
        self._busy = tuning.BusySwitchInterval()
        self._waiters: list[asyncio.Future[None]] = []
        # One worker: each CPU-bound thread takes the GIL for a switch interval at a time, and
        # the event loop, which needs it several times per request it serves, waits behind every
        # such thread; with one, its wait stays a few milliseconds (tests/hardening).
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="body-work")

    async def aclose(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        await self.process.aclose()

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
        if self.used == 0:
            self._busy.begin()
        self.used += need

    def release(self, need: int) -> None:
        self.used -= need
        if self.used == 0:
            self._busy.end()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def budget_for(request: Request) -> BodyWorkBudget | None:
    """The app's budget: where ``EdgeMiddleware`` put it in the scope (a dict lookup; ``app.state``
    goes through Starlette's ``State.__getattr__``, about 0.7 us, on every JSON body), else the
    app's (an app without that middleware)."""
    budget = request.scope.get(BUDGET_SCOPE_KEY)
    if budget is None:
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
    work = asyncio.get_running_loop().run_in_executor(budget.executor, tuning.without_gc_pauses, fn)

    def done(task: asyncio.Future[T]) -> None:
        budget.release(need)
        if not task.cancelled():
            task.exception()  # retrieved: a caller that left must not log "never retrieved"

    work.add_done_callback(done)
    return await asyncio.shield(work)


async def off_process(request: Request, nbytes: int, fn: Callable[..., T], body: bytes, *args: Any) -> T:
    """``fn(body, *args)``, inline when ``nbytes`` is small, else in the app's body process
    (``gateway.relay.body_process``): for work on a large body whose answer is small (a token count),
    so that neither its time nor its memory is the serving process's. ``fn`` must be a
    module-level function and its answer JSON (a tuple comes back as a list). Should the process
    fail, the work is done here (``off_loop``): slower, still correct."""
    budget = budget_for(request)
    if nbytes < INLINE_BYTES or budget is None:
        return await off_loop(request, nbytes, lambda: fn(body, *args))
    try:
        answer: T = await budget.process.call(f"{fn.__module__}:{fn.__qualname__}", body, *args)
        return answer
    except ChildFailed:
        logger.warning("the body process failed on %s; doing it here", fn.__qualname__, exc_info=True)
        return await off_loop(request, nbytes, lambda: fn(body, *args))


async def check_elements(request: Request, body: bytes, bound: int) -> None:
    """Refuse (400) a body with more elements than ``limits.json_max_elements``; ``bound`` is the
    tally read as it arrived. Only a body whose bound is over the limit is counted exactly."""
    budget = budget_for(request)
    if budget is None or bound <= budget.max_elements:
        return
    elements = await off_process(request, len(body), count_elements, body, budget.max_elements)
    if elements > budget.max_elements:
        raise InvalidRequest(
            f"The request body has more than {budget.max_elements} JSON elements (array items and "
            f"object members, `limits.json_max_elements`); send fewer messages or parts.")
