"""``gateway audit``: prove that the stored money adds up.

Checks (each inside one consistent read of the database): for every user, balance == sum of the
ledger's signed deltas, used == sum of charges, and the open reservations == the holds the ledger
has not closed; for every key, spent == sum of its charges and reserved == sum of its open
reservations; no balance is negative. An empty list means the books are clean.
"""

from __future__ import annotations

from gateway.storage import open_storage
from gateway.storage.base import AuditProblem, Storage

__all__ = ["AuditProblem", "audit_database", "format_problems", "run_audit"]


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
