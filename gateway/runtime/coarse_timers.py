"""Coarse timers for the deadlines of a call, which are armed on every call and almost never fire.

A call arms several deadlines (its body's, its upstream attempt's answer head, idle gap and total
time) and nearly always disarms each well before it is due. On the event loop each costs a timer
of its own: ``loop.call_at`` and its cancelling about 4 us on uvloop, ``asyncio.timeout`` entered
and left about 9.5 us (``docs/performance.md``). Here a deadline is an entry in the slot of
``TICK_S`` it falls in: arming and disarming are a dictionary insert and delete, and one loop timer
per event loop ticks from slot to slot while any deadline is armed. A deadline fires at most one
tick (plus the loop's own delay) after it is due, never before.

``CoarseTimers.call_at`` is the timer (a callback); ``Deadline`` is ``asyncio.timeout_at`` on it,
for code that must stop an ``await``.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Callable
from types import TracebackType

TICK_S = 0.005
_NEVER = -1  # the slot of a timer that never fires
# A time exactly on a slot's boundary divides to just under it in floating point (0.145 / 0.005 is
# 28.999...): without this the tick woken at the boundary would find its slot not yet due and spin.
_ROUNDING = 1e-6


def _slot_of(when: float) -> int:
    """The slot whose end is the first at or after ``when``."""
    return math.ceil(when / TICK_S - _ROUNDING)


def _slots_passed(now: float) -> int:
    """The last slot whose end is at or before ``now``."""
    return math.floor(now / TICK_S + _ROUNDING)


class CoarseTimer:
    """One armed callback; ``cancel`` disarms it (harmless when it already fired, and effective
    even from another callback of the same tick)."""

    __slots__ = ("_callback", "_cancelled", "_slot", "_timers")

    def __init__(self, timers: CoarseTimers, slot: int, callback: Callable[[], None]) -> None:
        self._timers = timers
        self._slot = slot
        self._callback = callback
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        self._timers._disarm(self)


class CoarseTimers:
    """The coarse timers of one event loop (``timers_of``)."""

    __slots__ = ("_armed", "_loop", "_next_slot", "_slots", "_ticking")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: these timers are the value of their loop's entry in ``timers_of``'s weak registry,
        # and a value holding its key would keep every loop ever used alive.
        self._loop = weakref.ref(loop)
        self._slots: dict[int, dict[CoarseTimer, None]] = {}
        self._armed = 0
        self._next_slot = 0  # the first slot not yet fired
        self._ticking = False  # the loop timer is set (not kept: its handle holds the loop)

    @property
    def armed(self) -> int:
        """How many timers wait to fire."""
        return self._armed

    @property
    def ticking(self) -> bool:
        """Whether the loop timer runs (only while a timer is armed, and until its next tick)."""
        return self._ticking

    def call_at(self, when: float, callback: Callable[[], None]) -> CoarseTimer:
        """``callback()`` once the loop's time is past ``when``, unless cancelled first (never
        for an infinite ``when``, as ``asyncio.timeout_at`` with one)."""
        loop = self._loop()
        if not when < math.inf or loop is None:
            return CoarseTimer(self, _NEVER, callback)
        if not self._ticking:  # nothing armed, or a tick is running its callbacks
            if not self._armed:  # the tick starts from now (else from the first slot not fired)
                self._next_slot = _slots_passed(loop.time()) + 1
            self._ticking = True
            loop.call_at(self._next_slot * TICK_S, self._tick)
        slot = max(_slot_of(when), self._next_slot)
        timer = CoarseTimer(self, slot, callback)
        entries = self._slots.get(slot)
        if entries is None:
            entries = self._slots[slot] = {}
        entries[timer] = None
        self._armed += 1
        return timer

    def _disarm(self, timer: CoarseTimer) -> None:
        entries = self._slots.get(timer._slot)
        if entries is not None and entries.pop(timer, 0) is None:
            self._armed -= 1
            if not entries:
                del self._slots[timer._slot]

    def _tick(self) -> None:
        self._ticking = False  # whatever a callback raises, the next ``call_at`` starts the tick again
        loop = self._loop()
        if loop is None:
            return
        now_slot = _slots_passed(loop.time())
        if now_slot - self._next_slot < len(self._slots):
            due = [s for s in range(self._next_slot, now_slot + 1) if s in self._slots]
        else:  # the loop was held for many ticks: walk the armed slots instead
            due = sorted(s for s in self._slots if s <= now_slot)
        self._next_slot = max(self._next_slot, now_slot + 1)
        for slot in due:
            entries = self._slots.pop(slot)
            self._armed -= len(entries)
            for timer in entries:
                if timer._cancelled:
                    continue
                try:
                    timer._callback()
                except Exception as exc:  # one timer's fault is not the others'
                    loop.call_exception_handler({"message": "a coarse timer's callback failed",
                                                       "exception": exc})
        if self._armed and not self._ticking:
            self._ticking = True
            loop.call_at(self._next_slot * TICK_S, self._tick)


# One set of timers per event loop, dropped with its loop (the loop is only a weak key here, and
# its timers refer to it only while they tick).
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CoarseTimers] = weakref.WeakKeyDictionary()


def timers_of(loop: asyncio.AbstractEventLoop) -> CoarseTimers:
    """``loop``'s coarse timers (made on first use)."""
    found = _by_loop.get(loop)
    if found is None:
        found = _by_loop[loop] = CoarseTimers(loop)
    return found


class Deadline:
    """``async with Deadline(when):`` raises ``TimeoutError`` when its body is still running at loop
    time ``when`` (coarse: up to a tick later), as ``asyncio.timeout_at`` does and by the same
    rules: the task is cancelled when the deadline passes, and the cancellation becomes
    ``TimeoutError`` at the exit unless someone else cancelled the task too (``Task.cancelling``
    counts the requests; ``uncancel`` takes ours back). ``reschedule`` moves it while inside.

    Not ``asyncio.timeout`` over a coarse timer: its context alone costs about 3.5 us entered and
    left, twice a call (``python -m bench.timer_cost``)."""

    __slots__ = ("_cancelling", "_expired", "_task", "_timer", "_timers", "_when")

    def __init__(self, when: float) -> None:
        self._when = when
        self._task: asyncio.Task[object] | None = None
        self._timer: CoarseTimer | None = None
        self._timers: CoarseTimers | None = None
        self._expired = False
        self._cancelling = 0

    async def __aenter__(self) -> Deadline:
        if self._task is not None:
            raise RuntimeError("a Deadline is entered once")
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a Deadline is used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._timers = timers_of(task.get_loop())
        self._timer = self._timers.call_at(self._when, self._expire)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._expired and self._task is not None:
            if self._task.uncancel() <= self._cancelling and kind is asyncio.CancelledError:
                raise TimeoutError from exc

    def reschedule(self, when: float) -> None:
        """The deadline moved to ``when`` (only while inside the ``async with``, before it passed)."""
        if self._timer is None or self._timers is None:
            return
        self._timer.cancel()
        self._when = when
        self._timer = self._timers.call_at(when, self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self._task is not None:
            self._expired = True
            self._task.cancel()
