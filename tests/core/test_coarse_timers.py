"""Coarse timers (``gateway.runtime.coarse_timers``): a deadline fires within a tick after it is
due and never before; a disarmed one never fires; the loop timer stops when nothing is armed."""

from __future__ import annotations

import asyncio

import pytest

from gateway.runtime.coarse_timers import TICK_S, Deadline, timers_of

UVLOOP_EARLY_S = 0.0011  # uvloop's timers have a 1 ms resolution


async def test_a_timer_fires_within_a_tick_after_it_is_due() -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    due = loop.time() + 0.05
    timers_of(loop).call_at(due, lambda: fired.append(loop.time()))
    await asyncio.sleep(0.05 + 4 * TICK_S)
    assert len(fired) == 1
    assert due - UVLOOP_EARLY_S <= fired[0] <= due + 3 * TICK_S


async def test_a_cancelled_timer_never_fires_and_the_tick_stops() -> None:
    loop = asyncio.get_running_loop()
    timers = timers_of(loop)
    fired: list[int] = []
    timer = timers.call_at(loop.time() + 0.02, lambda: fired.append(1))
    timer.cancel()
    timer.cancel()  # twice is harmless
    await asyncio.sleep(0.04)
    assert fired == []
    assert not timers.ticking  # nothing armed: no loop timer left


async def test_a_timer_already_due_fires_on_the_next_tick() -> None:
    loop = asyncio.get_running_loop()
    fired: list[int] = []
    timers_of(loop).call_at(loop.time() - 1, lambda: fired.append(1))
    await asyncio.sleep(3 * TICK_S)
    assert fired == [1]


async def test_one_failing_callback_does_not_stop_the_others() -> None:
    loop = asyncio.get_running_loop()
    seen: list[object] = []
    loop_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context["exception"]))
    try:
        fired: list[int] = []
        due = loop.time() + 0.01

        def broken() -> None:
            raise ValueError("broken")

        timers_of(loop).call_at(due, broken)
        timers_of(loop).call_at(due, lambda: fired.append(1))
        await asyncio.sleep(0.01 + 3 * TICK_S)
    finally:
        loop.set_exception_handler(loop_handler)
    assert fired == [1]
    assert len(seen) == 1 and isinstance(seen[0], ValueError)


async def test_a_deadline_raises_timeout_error_when_due() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        async with Deadline(started + 0.05):
            await asyncio.sleep(1)
    assert 0.05 - UVLOOP_EARLY_S <= loop.time() - started <= 0.05 + 4 * TICK_S


async def test_a_deadline_moved_later_lets_the_body_finish_and_disarms_on_exit() -> None:
    loop = asyncio.get_running_loop()
    async with Deadline(loop.time() + 0.02) as deadline:
        deadline.reschedule(loop.time() + 0.2)
        await asyncio.sleep(0.05)
    assert timers_of(loop).armed == 0


async def test_a_deadline_moved_earlier_fires_then() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        async with Deadline(started + 10) as deadline:
            deadline.reschedule(started + 0.03)
            await asyncio.sleep(1)
    assert loop.time() - started <= 0.03 + 4 * TICK_S


async def test_a_cancellation_from_outside_is_not_taken_for_the_deadline() -> None:
    loop = asyncio.get_running_loop()

    async def body() -> None:
        async with Deadline(loop.time() + 10):
            await asyncio.sleep(1)

    task = asyncio.create_task(body())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert timers_of(loop).armed == 0


async def test_an_outside_cancellation_wins_over_a_deadline_that_passed_with_it() -> None:
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    async def body() -> None:
        async with Deadline(loop.time() + 0.01):
            entered.set()
            try:
                await asyncio.sleep(1)
            finally:
                asyncio.current_task().cancel()  # type: ignore[union-attr]  # someone else's request too
                await asyncio.sleep(0)

    task = asyncio.create_task(body())
    await entered.wait()
    with pytest.raises(asyncio.CancelledError):
        await task



async def test_a_timer_cancelled_by_another_of_the_same_tick_does_not_fire() -> None:
    loop = asyncio.get_running_loop()
    timers = timers_of(loop)
    fired: list[str] = []
    due = loop.time() + 0.01
    second = None

    def first() -> None:
        fired.append("first")
        assert second is not None
        second.cancel()

    timers.call_at(due, first)
    second = timers.call_at(due, lambda: fired.append("second"))
    await asyncio.sleep(0.01 + 3 * TICK_S)
    assert fired == ["first"]
    assert timers.armed == 0


class _MillisecondLoop:
    """A loop whose clock reads whole milliseconds, as uvloop's does; timers recorded, not run."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.scheduled: list[float] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: object) -> asyncio.TimerHandle:
        self.scheduled.append(when)
        return asyncio.TimerHandle(when, lambda: None, (), asyncio.get_running_loop())


async def test_a_tick_on_a_slot_boundary_fires_that_slot() -> None:
    """0.145 / 0.005 is 28.999... in floating point: the tick woken at 0.145 s fires slot 29
    rather than finding it not yet due and asking to be woken at once again (a busy loop)."""
    from gateway.runtime.coarse_timers import CoarseTimers

    clock = _MillisecondLoop(0.14)
    timers = CoarseTimers(clock)  # type: ignore[arg-type]
    fired: list[int] = []
    timers.call_at(0.145, lambda: fired.append(1))
    clock.now = 0.145
    timers._tick()  # what the loop timer runs at its time
    assert fired == [1]
    assert not timers.ticking and timers.armed == 0


async def test_an_infinite_deadline_never_arms_anything() -> None:
    loop = asyncio.get_running_loop()
    timers = timers_of(loop)
    timer = timers.call_at(float("inf"), lambda: None)
    assert timers.armed == 0
    timer.cancel()
    async with Deadline(float("inf")):
        await asyncio.sleep(0)


async def test_a_deadline_is_entered_once() -> None:
    deadline = Deadline(asyncio.get_running_loop().time() + 10)
    async with deadline:
        pass
    with pytest.raises(RuntimeError):
        async with deadline:
            pass


def test_a_closed_loop_is_not_kept_alive_by_its_timers() -> None:
    import gc
    import weakref

    loop = asyncio.new_event_loop()

    async def arm() -> None:
        running = asyncio.get_running_loop()
        timers_of(running).call_at(running.time() + 100, lambda: None)

    loop.run_until_complete(arm())
    loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None
