"""What a hung test waits on, printed to the real stderr: used by the hang watchdog
(tests/conftest.py) and by tests that bound a wait of their own."""

from __future__ import annotations

import sys


async def dump_database_activity() -> None:
    """What every PostgreSQL session that is not idle is doing or waiting for (a hang in the
    database shows there: a lock wait, or a transaction left open by the client)."""
    import asyncpg

    from gateway.storage.testing import admin_dsn

    out = sys.__stderr__
    try:
        conn = await asyncpg.connect(admin_dsn(), timeout=3)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        print(f"=== PostgreSQL not reachable for the activity dump: {exc}", file=out)
        return
    try:
        rows = await conn.fetch(
            "SELECT pid, datname, state, wait_event_type, wait_event, now() - xact_start AS in_xact, "
            "pg_blocking_pids(pid) AS blocked_by, left(query, 200) AS query FROM pg_stat_activity "
            "WHERE state <> 'idle' AND pid <> pg_backend_pid()")
    finally:
        await conn.close()
    print("=== PostgreSQL sessions not idle ===", file=out)
    for row in rows:
        print("    " + " | ".join(str(v) for v in row.values()), file=out)
    if out is not None:
        out.flush()
