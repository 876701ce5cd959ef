"""``GroupReserve`` (gateway.storage.sql_money): a batch that is interrupted never leaves a caller
waiting, and the next reservations are batched as usual."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.storage.rows import Reservation
from gateway.storage.sql_money import GroupReserve


def hold(request_id: str) -> Reservation:
    return Reservation(request_id=request_id, user_id=1, key_id=1, amount_nano=10, instance="i")


class Database:
    """A write function that hangs while ``stuck`` is set, else grants a batch of one."""

    def __init__(self) -> None:
        self.stuck = True
        self.entered = asyncio.Event()

    async def write(self, fn: Any) -> Any:
        self.entered.set()
        if self.stuck:
            await asyncio.Event().wait()
        return [True]


async def test_an_interrupted_batch_fails_its_callers_instead_of_leaving_them_waiting() -> None:
    database = Database()
    group = GroupReserve(database.write, "0")
    first = asyncio.create_task(group.reserve(hold("a")))
    await database.entered.wait()
    queued = asyncio.create_task(group.reserve(hold("b")))  # waits for the batch in progress
    await asyncio.sleep(0)
    batches = list(group._batches)
    assert len(batches) == 2
    for batch in batches:
        batch.cancel()
    for caller in (first, queued):
        with pytest.raises(ConnectionError):
            await asyncio.wait_for(caller, 1)

    database.stuck = False
    assert await asyncio.wait_for(group.reserve(hold("c")), 1) is True
    await group.close(1)
    assert not group._batches


async def test_submitted_holds_are_batched_and_written_at_the_next_turn_of_the_loop() -> None:
    """``submit`` (what a stream's hold move uses, through ``reserve_soon``) queues at once: the
    holds of one turn share a batch, written at the next turn, while the caller goes on (e.g.
    to send its upstream request)."""
    writes = 0

    async def write(fn: Any) -> Any:
        nonlocal writes
        writes += 1
        return [True, True]  # a batch of two, granted

    group = GroupReserve(write, "0")
    first, second = group.submit(hold("a")), group.submit(hold("b"))
    assert not first.done() and writes == 0
    await asyncio.sleep(0)  # one turn: the batch task runs and commits
    assert writes == 1
    assert first.done() and await first is True and await second is True
    await group.close(1)
