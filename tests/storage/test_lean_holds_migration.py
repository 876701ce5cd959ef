"""Migration 0009 on a SQLite database of version 8 holding an open reservation: the hold survives
the rebuild of its table (now WITHOUT ROWID), closes exactly once afterwards, and the audit stays
clean. A fresh database of either dialect applies it in ``test_storage_contract``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gateway.storage import open_storage
from gateway.storage.migrations import load_migrations
from gateway.storage.rows import Reservation, Settlement
from gateway.storage.sql_common import SQLITE


def _database_of_version(path: Path, version: int) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                     "applied_at DOUBLE PRECISION NOT NULL)")
        for migration in load_migrations():
            if migration.version <= version:
                for statement in migration.statements(SQLITE.pk, SQLITE.without_rowid):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)",
                             (migration.version, migration.name))


async def test_open_hold_survives_the_rebuild(tmp_path: Path) -> None:
    path = tmp_path / "v8.db"
    _database_of_version(path, 8)
    storage = open_storage(f"sqlite:///{path}")
    # Version 8 as an older gateway left it: a user, a key and a hold in flight.
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO users (name, user_group, token_hash, balance_nano, created_at) "
                     "VALUES ('u', 'default', 't', 1000, 0)")
        conn.execute("INSERT INTO ledger (ts, kind, request_id, user_id, delta_nano) "
                     "VALUES (0, 'topup', 'top', 1, 1300)")
        conn.execute("INSERT INTO api_keys (user_id, name, key_hash, masked, reserved_nano, created_at) "
                     "VALUES (1, 'k', 'h', 'sk-m', 300, 0)")
        conn.execute("INSERT INTO ledger (ts, kind, request_id, user_id, key_id, delta_nano, amount_nano) "
                     "VALUES (0, 'reserve', 'in-flight', 1, 1, -300, 300)")
        conn.execute("INSERT INTO reservations VALUES ('in-flight', 1, 1, 300, 'old-process', 0)")
    await storage.open()
    try:
        assert await storage.schema_version() == max(m.version for m in load_migrations())
        assert await storage.audit() == []
        held = await storage.open_reservations()
        assert [(r.request_id, r.amount_nano, r.instance) for r in held] == [
            ("in-flight", 300, "old-process")]
        hold = Reservation("in-flight", 1, 1, 300, "old-process")
        await storage.settle_many([Settlement(hold, 120)])
        await storage.settle_many([Settlement(hold, 120)])  # closed already: changes nothing
        user, key = await storage.get_user(1), await storage.get_key(1)
        assert user is not None and key is not None
        assert (user.balance_nano, user.used_nano, key.spent_nano, key.reserved_nano) == (1180, 120, 120, 0)
        assert await storage.open_reservations() == []
        assert await storage.audit() == []
    finally:
        await storage.close()
    with sqlite3.connect(path) as conn:
        table_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'reservations'").fetchone()[0]
        indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "WITHOUT ROWID" in table_sql
    assert "ledger_user" not in indexes
