"""kill -9 in the middle of metered traffic: the books still balance, and the next process releases
what the dead one held."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from gateway.accounts.metering.audit import run_audit
from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import KeyRecord
from gateway.storage import open_storage
from gateway.storage.testing import sample_log

REPO = Path(__file__).resolve().parents[2]
BALANCE = 10**12

CHILD = r"""
import asyncio, sys, time
from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import KeyRecord, Principal, RequestLog, UserRecord
from gateway.storage import open_storage

async def main(url, user_id, key_id):
    storage = open_storage(url)
    await storage.open()
    meter = Meter(storage, "child", heartbeat_s=0.1, stale_after_s=0.5)
    await meter.start()
    principal = Principal(key=KeyRecord(id=key_id, user_id=user_id, name="k", key_hash="", masked=""),
                          user=UserRecord(id=user_id, name="u", group="default", balance_nano=0),
                          client_ip="127.0.0.1")
    done = 0

    async def worker(w):
        nonlocal done
        for i in range(10**9):
            rid = f"w{w}-{i}"
            reservation = await meter.reserve(rid, principal, 1000)
            await asyncio.sleep(0.002)
            meter.finish(RequestLog(request_id=rid, created_at=time.time(), user_id=user_id, key_id=key_id,
                                    token_name="k", route="/v1/chat/completions", family="chat",
                                    model="sim-chat", status=200, outcome="success"), reservation, 600)
            done += 1
            if done == 300:
                print("busy", flush=True)

    await asyncio.gather(*(worker(w) for w in range(16)))

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


async def kill_when_busy(code: str, url: str, user_id: int, key_id: int) -> None:
    """Run ``code`` (``CHILD`` or a variant) in a child process until it has made 300 calls, then
    kill it with SIGKILL."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, url, str(user_id), str(key_id),
        stdout=asyncio.subprocess.PIPE, cwd=REPO, env={**os.environ, "PYTHONPATH": path})
    try:
        line = await asyncio.wait_for(child.stdout.readline(), 30)  # type: ignore[union-attr]
    finally:
        child.send_signal(signal.SIGKILL)
        await child.communicate()
    assert line.strip() == b"busy"


@pytest.mark.slow
async def test_sigkill_then_sweeper_leaves_clean_books(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/crash.db"
    storage = open_storage(url)
    await storage.open()
    try:
        user = await storage.create_user("u", "default", BALANCE, "token-hash", "topup")
        key = await storage.create_key(KeyRecord(id=0, user_id=user.id, name="k", key_hash="key-hash",
                                                 masked="sk-..."))
        await kill_when_busy(CHILD, url, user.id, key.id)

        # At the moment of death the books balance; the dead process still holds reservations.
        held = await storage.open_reservations()
        assert held and {r.instance for r in held} == {"child"}
        assert await run_audit(storage) == []

        successor = Meter(storage, "successor", heartbeat_s=0.1, stale_after_s=0.5)
        await successor.start()
        try:
            for _ in range(100):
                if not await storage.open_reservations():
                    break
                await asyncio.sleep(0.05)
            assert await storage.open_reservations() == []
        finally:
            await successor.stop()

        assert await run_audit(storage) == []
        after = await storage.get_user(user.id)
        key_after = await storage.get_key(key.id)
        assert after is not None and key_after is not None
        assert after.balance_nano + after.used_nano == BALANCE  # nothing held, nothing lost
        assert after.used_nano == key_after.spent_nano > 0 and key_after.reserved_nano == 0
        page = await storage.log_page(user.id, 1, 10**6)
        released = {x.request_id for x in page.items if x.outcome == "crash_released"}
        assert released == {r.request_id for r in held}
    finally:
        await storage.close()


async def test_unstorable_log_still_settles(storage, new_principal) -> None:
    """A request log the database cannot take (lone surrogate, huge numbers) does not lose the
    money: it is written scrubbed."""
    p = await new_principal(balance_nano=10_000)
    meter = Meter(storage, "inst-scrub")
    await meter.start()
    try:
        r = await meter.reserve("odd", p, 1_000)
        meter.finish(sample_log(p, "odd", model="bad\ud800name", prompt_tokens=10**30), r, 300)
        await asyncio.wait_for(meter.flush(), 5)
    finally:
        await meter.stop()
    user = await storage.get_user(p.user.id)
    assert user is not None and user.used_nano == 300
    [entry] = (await storage.log_page(p.user.id, 1, 10)).items
    assert entry.model == "bad?name" and entry.charge_nano == 300
    assert await run_audit(storage) == []
