"""The request log's queries and its retention, in SQL for both backends (``?`` placeholders).

Pages of rows come from the raw table through its indexes (user, key, model, status, request id,
time; each with the time, so the newest are found first). A page's ``total`` does not count raw
rows (a count of millions of rows is seconds, whatever the index): it is summed from the roll-ups
(``sql_rollup``, written in the transactions that write the rows, so they agree with them exactly)
for whole UTC days and hours, and counted on raw rows only for the partial hours at the ends of the
range and for the hour retention is pruning now. Questions about everyone read ``usage_totals``
(no user or key in its rows: a few per hour), those about users or keys ``usage_rollups`` through
its user and key indexes.

Retention (``prune_logs``) deletes the oldest raw rows a small batch per transaction, one hour at a
time, oldest first, so a transaction never holds SQLite's write lock for long; the roll-ups stay.
``log_retention.floor_s`` is the hour below which every raw row is gone; the hour from it may be
half pruned, so its rows are counted raw. One process prunes at a time: a step first takes (or
renews) the pruning lease in ``log_retention``, a conditional update that only one of several
replicas sharing a PostgreSQL database can win while the holder renews it.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import msgspec

from gateway.storage.rows import DailyCost, LogFilter, LogPage
from gateway.storage.sql_common import SqlStorage, Tx
from gateway.storage.sql_request_log import LOG_FIELDS, log_from_row
from gateway.storage.sql_rollup import DAY_S, HOUR_S, span_start
from gateway.storage.usage_rows import PruneStep, UsageQuery, UsageRow

_FLOOR = "SELECT floor_s FROM log_retention WHERE name = 'request_logs'"
_TAKE_LEASE = ("UPDATE log_retention SET holder = ?, lease_until = {now} + ? WHERE name = 'request_logs' "
               "AND (holder IS NULL OR holder = ? OR lease_until < {now})")
_ERRORS = "CASE WHEN status >= 200 AND status < 300 THEN 0 ELSE calls END"
_USAGE_SUMS = {"calls": "calls", "errors": _ERRORS, "stream_calls": "stream_calls",
               "input_tokens": "prompt_tokens", "output_tokens": "completion_tokens",
               "cache_write_tokens": "cache_write_tokens", "cache_read_tokens": "cache_read_tokens",
               "reasoning_tokens": "reasoning_tokens", "cost_nano": "charge_nano",
               "uncharged_nano": "uncharged_nano", "latency_ms_sum": "use_time_ms"}
_UPSTREAM_SUMS = {"calls": "calls", "errors": "errors", "latency_ms_sum": "use_time_ms",
                  "first_byte_ms_sum": "first_byte_ms", "first_byte_calls": "first_byte_calls"}
_GROUP_COLUMNS = {"user": "user_id", "key": "key_id", "model": "model", "group": "user_group"}


def _sums(columns: dict[str, str]) -> str:
    return ", ".join(f"CAST(SUM({expr}) AS BIGINT) AS {name}" for name, expr in columns.items())


def log_where(where: LogFilter) -> tuple[str, list[Any]]:
    """The WHERE clause (never empty) and its arguments for a log filter."""
    clauses, args = _equal(where, {"request_id": where.request_id})
    # The time bounds as literals, not parameters: PostgreSQL switches a prepared statement to a
    # generic plan after a few runs, and a generic plan cannot see how narrow a range is (once a
    # scan of the time index for a filter its user index answers at once).
    if where.since is not None:
        clauses.append(f"created_at >= {_seconds(where.since)}")
    if where.until is not None:
        clauses.append(f"created_at < {_seconds(where.until)}")
    return " AND ".join(clauses), args


def _seconds(ts: float) -> str:
    """A time as an SQL literal (repr of a float reads back exactly; never NaN or infinite)."""
    value = float(ts)
    if not math.isfinite(value):
        raise ValueError(f"not a time: {ts!r}")
    return repr(value)


def _equal(where: LogFilter, extra: dict[str, Any] | None = None) -> tuple[list[str], list[Any]]:
    """``column = ?`` for the filter's user, key, model and status (and ``extra``)."""
    clauses = ["1 = 1"]
    args: list[Any] = []
    for column, value in (("user_id", where.user_id), ("key_id", where.key_id), ("model", where.model),
                          ("status", where.status), *(extra or {}).items()):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    return clauses, args


def _table(user_id: int | None, key_id: int | None, by_account: bool = False) -> str:
    """The roll-ups a question reads: per key when it is about users or keys, else the totals."""
    return "usage_rollups" if by_account or user_id is not None or key_id is not None else "usage_totals"


def _span_range(span: int, since: int, until: int | None) -> str:
    """The roll-up rows of spans starting in [since, until), the bounds written as integer
    literals rather than parameters: PostgreSQL plans a prepared statement once for any values
    after a few runs, and a range whose size it cannot see was planned as a scan of the table."""
    upper = "" if until is None else f" AND start_s < {int(until)}"
    return f"span_s = {int(span)} AND start_s >= {int(since)}{upper}"


def _ceil(ts: float, span: int) -> int:
    start = span_start(ts, span)
    return start if start == ts else start + span


class SqlUsage(SqlStorage):
    """``SqlStorage`` plus the request log's pages, counts, usage and retention."""

    # --- pages -----------------------------------------------------------------------------------
    async def query_logs(self, where: LogFilter, page: int, page_size: int) -> LogPage:
        page, page_size = max(page, 1), max(page_size, 1)
        clause, args = log_where(where)
        offset = (page - 1) * page_size
        async with self._snapshot() as tx:
            if self.dialect.name == "postgresql":
                # Planned for these values every time: after five runs of a prepared statement
                # PostgreSQL may keep a generic plan, blind to how few rows a user's filter or a
                # time range match (figures in docs/performance.md).
                await tx.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            total = await self._count(tx, where)  # all the filter's rows: the cursor does not count
            if where.before is not None:  # keyset: the rows after the cursor's row (the page is ignored)
                cursor = await tx.fetchall("SELECT created_at FROM request_logs WHERE id = ?",
                                           (where.before,))
                if not cursor:  # pruned by retention, with every older row, or never there
                    return LogPage(items=[], total=total)
                at = _seconds(cursor[0]["created_at"])
                # The first clause alone is what the time indexes answer; the second breaks ties.
                clause += f" AND created_at <= {at} AND (created_at < {at} OR id < {int(where.before)})"
                offset = 0
            rows = await tx.fetchall(
                f"SELECT id AS row_id, {', '.join(LOG_FIELDS)} FROM request_logs WHERE {clause} "
                "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (*args, page_size, offset))
        next_before = int(rows[-1]["row_id"]) if len(rows) == page_size else None
        return LogPage(items=[log_from_row(r) for r in rows], total=total, next_before=next_before)

    async def log_page(self, user_id: int, page: int, page_size: int) -> LogPage:
        return await self.query_logs(LogFilter(user_id=user_id), page, page_size)

    # --- counts ----------------------------------------------------------------------------------
    async def _count(self, tx: Tx, where: LogFilter) -> int:
        """How many raw rows match ``where`` (see the module docstring)."""
        if where.request_id is not None:  # a handful of rows at most, by its index
            return await self._raw_count(tx, where, where.since, where.until)
        floor = int((await tx.fetchall(_FLOOR))[0]["floor_s"])
        since = float(floor if where.since is None else max(where.since, floor))
        until = None if where.until is None else float(where.until)
        if until is not None and since >= until:
            return 0
        total = 0
        settled = floor + HOUR_S  # the hour from the floor may be half pruned: counted raw
        if since < settled:
            end = settled if until is None else min(until, settled)
            total += await self._raw_count(tx, where, since, end)
            since = settled
            if until is not None and since >= until:
                return total
        return total + await self._rolled_count(tx, where, since, until)

    async def _rolled_count(self, tx: Tx, where: LogFilter, since: float, until: float | None) -> int:
        """Whole days and hours of [since, until) from the roll-ups, the partial hours raw."""
        first_hour = _ceil(since, HOUR_S)
        last_hour = None if until is None else span_start(until, HOUR_S)
        if until is not None and last_hour is not None and first_hour >= last_hour:
            return await self._raw_count(tx, where, since, until)
        total = await self._raw_count(tx, where, since, first_hour)
        if until is not None and last_hour is not None:
            total += await self._raw_count(tx, where, last_hour, until)
        first_day = _ceil(first_hour, DAY_S)
        last_day = None if last_hour is None else span_start(last_hour, DAY_S)
        if last_day is not None and first_day >= last_day:
            return total + await self._rolled(tx, where, HOUR_S, first_hour, last_hour)
        total += await self._rolled(tx, where, HOUR_S, first_hour, first_day)
        total += await self._rolled(tx, where, DAY_S, first_day, last_day)
        if last_day is not None and last_hour is not None:
            total += await self._rolled(tx, where, HOUR_S, last_day, last_hour)
        return total

    async def _raw_count(self, tx: Tx, where: LogFilter, since: float | None, until: float | None) -> int:
        if since is not None and until is not None and since >= until:
            return 0
        clause, args = log_where(msgspec.structs.replace(where, since=since, until=until))
        rows = await tx.fetchall(f"SELECT COUNT(*) AS n FROM request_logs WHERE {clause}", args)
        return int(rows[0]["n"])

    async def _rolled(self, tx: Tx, where: LogFilter, span: int, since: int, until: int | None) -> int:
        if until is not None and since >= until:
            return 0
        clauses, args = _equal(where)
        clauses.append(_span_range(span, since, until))
        table = _table(where.user_id, where.key_id)
        rows = await tx.fetchall(f"SELECT CAST(SUM(calls) AS BIGINT) AS n FROM {table} "
                                 f"WHERE {' AND '.join(clauses)}", args)
        return int(rows[0]["n"] or 0)

    # --- usage from the roll-ups -----------------------------------------------------------------
    async def usage_rows(self, query: UsageQuery) -> list[UsageRow]:
        """Sums per span (and ``group_by`` value) of the roll-ups, oldest span first."""
        column: str | None
        if query.group_by == "upstream":
            table, sums, column = "upstream_rollups", _UPSTREAM_SUMS, "upstream"
            clauses: list[str] = ["1 = 1"]
            args: list[Any] = []
        else:
            column = _GROUP_COLUMNS[query.group_by] if query.group_by is not None else None
            by_account = query.group_by in ("user", "key")
            table, sums = _table(query.user_id, query.key_id, by_account), _USAGE_SUMS
            clauses, args = _equal(LogFilter(user_id=query.user_id, key_id=query.key_id, model=query.model))
        clauses.append(_span_range(query.span_s, query.since, query.until))
        grouped = "start_s" if column is None else f"start_s, {column}"
        picked = "start_s" if column is None else f"start_s, {column} AS group_key"
        rows = await self._fetch(f"SELECT {picked}, {_sums(sums)} FROM {table} WHERE {' AND '.join(clauses)} "
                                 f"GROUP BY {grouped} ORDER BY start_s", args)
        if table == "upstream_rollups":
            return [UsageRow(start=int(r["start_s"]), key=r["group_key"],
                             **{name: int(r[name] or 0) for name in sums}) for r in rows]
        # Positional (the sums are UsageRow's first fields, in order): thousands of rows at times.
        names = tuple(sums)
        return [UsageRow(int(r["start_s"]), None if column is None else r["group_key"],
                         *[int(r[name] or 0) for name in names]) for r in rows]

    async def daily_costs(self, key_id: int, start_ts: int, end_ts: int) -> list[DailyCost]:
        return await self._daily_costs("key_id", key_id, start_ts, end_ts)

    async def user_daily_costs(self, user_id: int, start_ts: int, end_ts: int) -> list[DailyCost]:
        return await self._daily_costs("user_id", user_id, start_ts, end_ts)

    async def _daily_costs(self, column: str, value: int, start_ts: int, end_ts: int) -> list[DailyCost]:
        """Charges per UTC day and model, from the daily roll-ups of the days that start in the
        range (the account endpoints ask for whole days)."""
        rows = await self._fetch(
            "SELECT start_s, model, CAST(SUM(charge_nano) AS BIGINT) AS cost FROM usage_rollups "
            f"WHERE span_s = ? AND {column} = ? AND start_s >= ? AND start_s < ? GROUP BY start_s, model "
            "ORDER BY start_s, model", (DAY_S, value, _ceil(start_ts, DAY_S), _ceil(end_ts, DAY_S)))
        return [DailyCost(day=_day(int(r["start_s"])), model=r["model"], cost_nano=int(r["cost"] or 0))
                for r in rows]

    # --- retention -------------------------------------------------------------------------------
    async def prune_logs(self, cutoff: float, holder: str, batch: int, lease_s: float) -> PruneStep:
        """One retention step: up to ``batch`` of the oldest raw rows older than the hour of
        ``cutoff`` deleted, if ``holder`` holds (or takes) the pruning lease for ``lease_s``."""
        target = span_start(cutoff, HOUR_S)

        async def fn(tx: Tx) -> PruneStep:
            if not await tx.execute(self._sql(_TAKE_LEASE), (holder, lease_s, holder)):
                return PruneStep(deleted=0, held=False, done=False)
            floor = int((await tx.fetchall(_FLOOR))[0]["floor_s"])
            oldest = (await tx.fetchall("SELECT MIN(created_at) AS t FROM request_logs"))[0]["t"]
            if oldest is None or oldest >= target:
                if floor < target:
                    await tx.execute("UPDATE log_retention SET floor_s = ? WHERE name = 'request_logs'",
                                     (target,))
                return PruneStep(deleted=0, held=True, done=True)
            hour = max(floor, span_start(oldest, HOUR_S))  # no raw row below it: the floor
            end = hour + HOUR_S
            deleted = await tx.execute(
                "DELETE FROM request_logs WHERE id IN (SELECT id FROM request_logs WHERE created_at < ? "
                "ORDER BY created_at LIMIT ?)", (float(end), batch))
            left = await tx.fetchall("SELECT 1 AS one FROM request_logs WHERE created_at < ? LIMIT 1",
                                     (float(end),))
            await tx.execute("UPDATE log_retention SET floor_s = ? WHERE name = 'request_logs'",
                             (hour if left else end,))
            return PruneStep(deleted=deleted, held=True, done=not left and end >= target)

        return await self._write(fn)

    async def release_prune_lease(self, holder: str) -> None:
        await self._write(lambda tx: tx.execute(
            "UPDATE log_retention SET holder = NULL, lease_until = 0 "
            "WHERE name = 'request_logs' AND holder = ?", (holder,)))


def _day(start: int) -> str:
    return datetime.datetime.fromtimestamp(start, datetime.UTC).strftime("%Y-%m-%d")
