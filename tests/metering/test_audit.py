"""``run_audit`` (behind ``gateway audit``): clean books, then books tampered with behind its back."""

from __future__ import annotations

from pathlib import Path

import aiosqlite

from gateway.accounts.metering.audit import audit_database, format_problems, run_audit
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.rows import Reservation, Settlement
from gateway.storage.testing import NewPrincipal


async def test_run_audit_clean(storage: Storage, new_principal: NewPrincipal) -> None:
    p = await new_principal(balance_nano=5_000, quota_nano=3_000)
    r = Reservation("r", p.user.id, p.key.id, 2_000, "i")
    assert await storage.reserve(r)
    assert await run_audit(storage) == []  # an open reservation is not a problem
    await storage.settle_many([Settlement(r, 1_500)])
    await storage.topup(p.user.id, 700, "t")
    assert await run_audit(storage) == []
    assert format_problems([]).startswith("audit clean")


async def test_audit_database_reports_tampering(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/books.db"
    storage = open_storage(url)
    await storage.open()
    user = await storage.create_user("u", "default", 1_000, "h", "t")
    await storage.close()
    async with aiosqlite.connect(tmp_path / "books.db") as conn:
        await conn.execute("UPDATE users SET balance_nano = 5000, used_nano = 3")
        await conn.commit()
    problems = await audit_database(url)
    text = format_problems(problems)
    assert f"user {user.id}: balance_nano is 5000, the ledger says 1000" in text
    assert f"user {user.id}: used_nano is 3, the ledger says 0" in text
