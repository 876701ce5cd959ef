"""The request log's rows, written once for both SQL backends: how a ``RequestLog`` becomes a row
and back, and the one statement that inserts rows (with their roll-ups, ``sql_rollup``)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from gateway.accounts.records import RequestLog
from gateway.storage.sql_dialect import Row, Tx
from gateway.storage.sql_rollup import add_to_rollups

LOG_FIELDS: tuple[str, ...] = RequestLog.__struct_fields__
_LOG_BOOLS = ("is_stream", "usage_estimated")
INSERT_LOG = (f"INSERT INTO request_logs ({', '.join(LOG_FIELDS)}) "
              f"VALUES ({', '.join('?' * len(LOG_FIELDS))})")


async def insert_logs(tx: Tx, logs: Sequence[RequestLog]) -> None:
    """Write request-log rows and add them to the roll-ups (``sql_rollup``), in ``tx``: the one
    way rows enter the request log."""
    if logs:
        await tx.executemany(INSERT_LOG, [msgspec.structs.astuple(log) for log in logs])
        await add_to_rollups(tx, logs)


def log_from_row(row: Row) -> RequestLog:
    values = {f: row[f] for f in LOG_FIELDS}
    for f in _LOG_BOOLS:
        values[f] = bool(values[f])
    return RequestLog(**values)
