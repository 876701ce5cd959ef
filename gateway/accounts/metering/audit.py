"""``gateway audit``: prove that the stored money adds up.

Checks (each inside one consistent read of the database): for every user, balance == sum of the
ledger's signed deltas, used == sum of charges, and the open reservations == the holds the ledger
has not closed; for every key, spent == sum of its charges and reserved == sum of its open
reservations; no balance is negative. An empty list means the books are clean.

It also lists what could not be charged (``uncharged`` ledger rows: served calls whose actual cost
exceeded what the balance or the key's ceiling still allowed). They are not problems of the books,
which still add up, but money the operator may want to recover, so they are shown, not hidden.
"""

from __future__ import annotations

from gateway.accounts.money import nano_to_usd
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.rows import AuditProblem, UnchargedEntry

__all__ = ["AuditProblem", "UnchargedEntry", "audit_database", "format_problems", "format_uncharged",
           "run_audit", "uncharged"]


async def run_audit(storage: Storage) -> list[AuditProblem]:
    return await storage.audit()


async def audit_database(database_url: str) -> list[AuditProblem]:
    """Open the database at ``database_url`` (migrating it if needed), audit it, close it."""
    storage = open_storage(database_url)
    await storage.open()
    try:
        return await run_audit(storage)
    finally:
        await storage.close()


def format_problems(problems: list[AuditProblem]) -> str:
    """One line per problem, or a single line saying the books are clean."""
    if not problems:
        return "audit clean: balances, charges and reservations match the ledger"
    return "\n".join(f"{p.subject}: {p.problem}" for p in problems)


async def uncharged(storage: Storage, limit: int = 1000) -> list[UnchargedEntry]:
    """The newest ``limit`` uncharged entries."""
    return await storage.uncharged_entries(limit)


def format_uncharged(entries: list[UnchargedEntry]) -> str:
    """One line per uncharged call, after a total; empty when there is none."""
    if not entries:
        return ""
    total = sum(e.uncharged_nano for e in entries)
    lines = [f"uncharged: {len(entries)} call(s), ${nano_to_usd(total):.9f} in all "
             "(cost above what the balance or key ceiling allowed)"]
    lines += [f"  request {e.request_id}: user {e.user_id}, key {e.key_id}, "
              f"${nano_to_usd(e.uncharged_nano):.9f}" for e in entries]
    return "\n".join(lines)
