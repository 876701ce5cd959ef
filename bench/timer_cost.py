"""What a call's deadlines cost the event loop: ``python -m bench.timer_cost``.

A same-format call arms three deadlines and disarms each long before it is due: its body's (around
the ``receive`` of the body), its upstream attempt's answer head (moved once the request is
written), and the answer's idle and total time (one timer for the answer's life). Measured here
alone, on uvloop, as CPU per call (best of 5 rounds of 100,000):

* ``event loop timers``: ``asyncio.timeout`` for the body and the head (with its ``reschedule``),
  ``loop.call_at`` for the answer, as before ``gateway.runtime.coarse_timers``;
* ``coarse timers``: the same three with ``Deadline`` and ``CoarseTimers.call_at``.
"""

from __future__ import annotations

import asyncio
import time

from gateway.runtime.coarse_timers import Deadline, timers_of
from gateway.server.servers import event_loop_factory

CALLS = 100_000
ROUNDS = 5


def _nothing() -> None:
    pass


async def _ready() -> None:
    """An await that does not suspend: a ``receive`` whose body is already there."""


async def _loop_timers(calls: int) -> float:
    loop = asyncio.get_running_loop()
    start = time.process_time()
    for _ in range(calls):
        async with asyncio.timeout(30):  # the body
            await _ready()
        async with asyncio.timeout_at(loop.time() + 60) as head:
            head.reschedule(loop.time() + 30)
            await _ready()
        loop.call_at(loop.time() + 300, _nothing).cancel()  # the answer
    return (time.process_time() - start) / calls


async def _coarse_timers(calls: int) -> float:
    loop = asyncio.get_running_loop()
    timers = timers_of(loop)
    start = time.process_time()
    for _ in range(calls):
        async with Deadline(loop.time() + 30):
            await _ready()
        async with Deadline(loop.time() + 60) as head:
            head.reschedule(loop.time() + 30)
            await _ready()
        timers.call_at(loop.time() + 300, _nothing).cancel()
    return (time.process_time() - start) / calls


async def _figures() -> dict[str, float]:
    best = {"event loop timers": float("inf"), "coarse timers": float("inf")}
    for _ in range(ROUNDS):  # interleaved, so that a drift of the machine hits both
        best["event loop timers"] = min(best["event loop timers"], await _loop_timers(CALLS))
        best["coarse timers"] = min(best["coarse timers"], await _coarse_timers(CALLS))
    return best


def main() -> None:
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        figures = runner.run(_figures())
    print("| deadlines of one call | CPU us |\n|---|---:|")
    for name, seconds in figures.items():
        print(f"| {name} | {seconds * 1e6:.2f} |")


if __name__ == "__main__":
    main()
