"""The audit of the books (``gateway audit``), written once for both SQL backends: every user's
balance, spending and open holds, and every key's spending and holds, against the ledger and the
reservations table. Runs inside a read-only transaction the caller opened (one consistent state).
"""

from __future__ import annotations

from gateway.storage.rows import AuditProblem
from gateway.storage.sql_money import Tx

_AUDIT_USERS = """SELECT u.id, u.balance_nano, u.used_nano, u.reserved_nano,
    COALESCE(l.delta, 0) AS delta, COALESCE(l.charge, 0) AS charge, COALESCE(l.held, 0) AS held,
    COALESCE(r.open_nano, 0) AS open_nano
FROM users u
LEFT JOIN (SELECT user_id, CAST(SUM(delta_nano) AS BIGINT) AS delta,
                  CAST(SUM(charge_nano) AS BIGINT) AS charge,
                  CAST(SUM(CASE WHEN kind = 'reserve' THEN amount_nano ELSE -amount_nano END)
                       AS BIGINT) AS held
           FROM ledger GROUP BY user_id) l ON l.user_id = u.id
LEFT JOIN (SELECT user_id, CAST(SUM(amount_nano) AS BIGINT) AS open_nano
           FROM reservations GROUP BY user_id) r ON r.user_id = u.id
ORDER BY u.id"""
_AUDIT_KEYS = """SELECT k.id, k.spent_nano, k.reserved_nano,
    COALESCE(l.charge, 0) AS charge, COALESCE(r.open_nano, 0) AS open_nano
FROM api_keys k
LEFT JOIN (SELECT key_id, CAST(SUM(charge_nano) AS BIGINT) AS charge
           FROM ledger WHERE key_id IS NOT NULL GROUP BY key_id) l ON l.key_id = k.id
LEFT JOIN (SELECT key_id, CAST(SUM(amount_nano) AS BIGINT) AS open_nano
           FROM reservations GROUP BY key_id) r ON r.key_id = k.id
ORDER BY k.id"""


async def audit_in_tx(tx: Tx) -> list[AuditProblem]:
    problems: list[AuditProblem] = []

    def check(subject: str, what: str, stored: int, expected: int, source: str = "the ledger") -> None:
        if stored != expected:
            problems.append(AuditProblem(subject, f"{what} is {stored}, {source} says {expected}"))

    for u in await tx.fetchall(_AUDIT_USERS):
        subject = f"user {u['id']}"
        check(subject, "balance_nano", u["balance_nano"], u["delta"])
        check(subject, "used_nano", u["used_nano"], u["charge"])
        check(subject, "sum of open reservations", u["open_nano"], u["held"])
        check(subject, "reserved_nano", u["reserved_nano"], u["open_nano"], "the reservations table")
        if u["balance_nano"] < 0:
            problems.append(AuditProblem(subject, f"negative balance {u['balance_nano']}"))
    for k in await tx.fetchall(_AUDIT_KEYS):
        subject = f"key {k['id']}"
        check(subject, "spent_nano", k["spent_nano"], k["charge"])
        check(subject, "reserved_nano", k["reserved_nano"], k["open_nano"], "the reservations table")
    return problems
