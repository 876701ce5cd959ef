"""The request log's roll-ups, kept up to date in the transaction that writes its rows.

Every statement that inserts request-log rows (``sql_request_log.insert_logs``) adds them to
``usage_rollups`` (calls, tokens, money and time per hour and per UTC day, user, key, model, group
and status), ``usage_totals`` (the same without user and key, for questions about everyone) and
``upstream_rollups`` (calls, errors and latency per hour and day and upstream) in
the same transaction: a roll-up can neither miss a row nor count one twice, whatever crashes, and
dashboards read months without a scan of raw rows. A batch is summed in memory first, so a batch of
hundreds of calls writes a handful of roll-up rows. Roll-up rows are upserted in key order, after
every money row of the transaction (the lock order of ``sql_money``), so concurrent batches of
several processes cannot deadlock on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.accounts.records import RequestLog
from gateway.storage.sql_dialect import Tx

HOUR_S = 3600
DAY_S = 86400
SPANS = (HOUR_S, DAY_S)
USAGE_KEY = ("span_s", "start_s", "user_id", "key_id", "model", "user_group", "status")
USAGE_SUMS = ("calls", "stream_calls", "prompt_tokens", "completion_tokens", "cache_write_tokens",
              "cache_read_tokens", "reasoning_tokens", "charge_nano", "uncharged_nano", "use_time_ms")
TOTALS_KEY = ("span_s", "start_s", "model", "user_group", "status")
UPSTREAM_KEY = ("span_s", "start_s", "upstream")
UPSTREAM_SUMS = ("calls", "errors", "use_time_ms", "first_byte_ms", "first_byte_calls")
_IDS_PER_QUERY = 500  # far below SQLite's parameter limit


def _upsert(table: str, key: tuple[str, ...], sums: tuple[str, ...]) -> str:
    columns = (*key, *sums)
    return (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET "
            + ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in sums))


UPSERT_USAGE = _upsert("usage_rollups", USAGE_KEY, USAGE_SUMS)
UPSERT_TOTALS = _upsert("usage_totals", TOTALS_KEY, USAGE_SUMS)
UPSERT_UPSTREAM = _upsert("upstream_rollups", UPSTREAM_KEY, UPSTREAM_SUMS)


def span_start(ts: float, span_s: int) -> int:
    """The start of the hour or UTC day holding ``ts`` (the floor, also before 1970)."""
    return int(ts // span_s) * span_s


def is_error(status: int) -> bool:
    return not 200 <= status < 300


async def add_to_rollups(tx: Tx, logs: Sequence[RequestLog]) -> None:
    """Add ``logs`` (as they are written, charges booked) to the roll-ups, inside ``tx``."""
    if not logs:
        return
    groups = await _groups(tx, {log.user_id for log in logs if log.user_id})
    # Each row is summed once, into its hour; the day rows and the totals are then summed from
    # the hour rows (a day is 24 whole hours), a handful per batch instead of three more per row.
    hours: dict[tuple[Any, ...], list[int]] = {}
    upstream_hours: dict[tuple[Any, ...], list[int]] = {}
    for log in logs:
        start = span_start(log.created_at, HOUR_S)
        values = (1, int(log.is_stream), log.prompt_tokens, log.completion_tokens, log.cache_write_tokens,
                  log.cache_read_tokens, log.reasoning_tokens, log.charge_nano, log.uncharged_nano,
                  log.use_time_ms)
        _add(hours, (HOUR_S, start, log.user_id, log.key_id, log.model, groups.get(log.user_id, ""),
                     log.status), values)
        if log.upstream is not None:
            first = log.first_byte_ms
            timed = (1, int(is_error(log.status)), log.use_time_ms, first or 0, int(first is not None))
            _add(upstream_hours, (HOUR_S, start, log.upstream), timed)
    usage = dict(hours)
    totals: dict[tuple[Any, ...], list[int]] = {}
    for (_, start, user_id, key_id, model, group, status), sums in hours.items():
        day = span_start(start, DAY_S)
        _add(usage, (DAY_S, day, user_id, key_id, model, group, status), sums)
        _add(totals, (HOUR_S, start, model, group, status), sums)
        _add(totals, (DAY_S, day, model, group, status), sums)
    upstream = dict(upstream_hours)
    for (_, start, name), sums in upstream_hours.items():
        _add(upstream, (DAY_S, span_start(start, DAY_S), name), sums)
    await tx.executemany(UPSERT_USAGE, [(*k, *v) for k, v in sorted(usage.items())])
    await tx.executemany(UPSERT_TOTALS, [(*k, *v) for k, v in sorted(totals.items())])
    if upstream:
        await tx.executemany(UPSERT_UPSTREAM, [(*k, *v) for k, v in sorted(upstream.items())])


def _add(into: dict[tuple[Any, ...], list[int]], key: tuple[Any, ...], values: Sequence[int]) -> None:
    sums = into.get(key)
    into[key] = list(values) if sums is None else [a + b for a, b in zip(sums, values, strict=True)]


async def _groups(tx: Tx, user_ids: set[int]) -> dict[int, str]:
    """The group of each user as the roll-ups file it (deleted users keep theirs)."""
    found: dict[int, str] = {}
    ids = sorted(user_ids)
    for i in range(0, len(ids), _IDS_PER_QUERY):
        part = ids[i:i + _IDS_PER_QUERY]
        marks = ", ".join("?" * len(part))
        for row in await tx.fetchall(f"SELECT id, user_group FROM users WHERE id IN ({marks})", part):
            found[int(row["id"])] = str(row["user_group"])
    return found
