"""Issue 34 point 3 on SQLite and PostgreSQL, through HTTP: the roll-ups equal the sums of the raw
request-log rows after a random mix of calls and refusals; ``/admin/logs`` totals (summed from the
roll-ups) equal raw counts for every filter and odd time ranges; retention deletes old rows in small
batches, one process at a time, and the roll-ups (so ``/admin/usage``) keep them; the usage
endpoint's shape; the log queries' plans use the indexes."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from typing import Any

import pytest

from gateway.accounts.metering.retention import RETENTION, LogRetention
from gateway.accounts.records import RequestLog
from gateway.storage.rows import LogFilter
from gateway.storage.sql_common import SqlStorage
from gateway.storage.sql_rollup import DAY_S, HOUR_S, span_start
from gateway.storage.sql_usage import log_where

CHAT = {"model": "sim-chat", "max_tokens": 8, "messages": [{"role": "user", "content": "hello"}]}
SUMMED = ("prompt_tokens", "completion_tokens", "cache_write_tokens", "cache_read_tokens",
          "reasoning_tokens", "charge_nano", "uncharged_nano", "use_time_ms")


async def _gateway(gateway_server: Any, make_config: Any, database_url: str, **overrides: Any) -> Any:
    gw = await gateway_server(make_config(database=database_url, **overrides))
    gw.user = await gw.create_user("u", quota_usd=100)
    gw.key_record = await gw.create_key(gw.user["id"], name="test")
    return gw


async def _random_calls(gw: Any, rng: random.Random, n: int) -> None:
    other = await gw.create_key(gw.user["id"], name="other")
    for _ in range(n):
        key = rng.choice([gw.key, other["key"]])
        kind = rng.randrange(7)
        if kind == 0:
            await gw.request("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, key=key)
        elif kind == 1:
            await gw.request("POST", "/v1/chat/completions", json={**CHAT, "model": "nope"}, key=key)
        elif kind == 2:
            await gw.request("GET", "/v1/models", key="sk-" + "q" * 40)
        elif kind == 3:
            await gw.request("POST", "/v1/messages", key=key, headers={"anthropic-version": "2023-06-01"},
                             json={"model": "sim-claude", "max_tokens": 8,
                                   "messages": [{"role": "user", "content": "hi"}]})
        elif kind == 4:
            await gw.request("POST", "/v1/embeddings", json={"model": "sim-embed", "input": "hi"}, key=key)
        else:
            await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key)
    await gw.gateway.meter.flush()


def _old_rows(user_id: int, key_id: int, now: float, hours: int, per_hour: int) -> list[RequestLog]:
    """Rows spread over the last ``hours`` hours (odd offsets inside each hour), several statuses."""
    rows = []
    for h in range(hours):
        for i in range(per_hour):
            status = (200, 200, 429, 404)[i % 4]
            rows.append(RequestLog(
                request_id=f"req_old_{h}_{i}", created_at=now - h * HOUR_S - i * 97.3 - 11.5, user_id=user_id,
                key_id=key_id, token_name="test", route="/v1/chat/completions", family="chat",
                model=("sim-chat", "sim-gemini")[i % 2], status=status,
                outcome="success" if status == 200 else "client_error", prompt_tokens=i,
                completion_tokens=2 * i,
                charge_nano=1000 * i if status == 200 else 0, use_time_ms=5 + i, upstream="sim-openai",
                first_byte_ms=3, error_code=None if status == 200 else "rate_limit_exceeded"))
    return rows


async def _raw(storage: SqlStorage) -> list[Any]:
    return await storage._fetch("SELECT r.*, u.user_group AS grp FROM request_logs r "
                                "LEFT JOIN users u ON u.id = r.user_id")


async def _assert_rollups_match(storage: SqlStorage) -> int:
    expected: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    upstream: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    raw = await _raw(storage)
    for row in raw:
        for span in (HOUR_S, DAY_S):
            start = span_start(row["created_at"], span)
            sums = expected[(span, start, row["user_id"], row["key_id"], row["model"], row["grp"] or "",
                             row["status"])]
            sums["calls"] += 1
            sums["stream_calls"] += int(bool(row["is_stream"]))
            for name in SUMMED:
                sums[name] += row[name]
            if row["upstream"] is not None:
                up = upstream[(span, start, row["upstream"])]
                up["calls"] += 1
                up["errors"] += int(not 200 <= row["status"] < 300)
                up["use_time_ms"] += row["use_time_ms"]
                up["first_byte_ms"] += row["first_byte_ms"] or 0
                up["first_byte_calls"] += int(row["first_byte_ms"] is not None)
    rolled = {(r["span_s"], r["start_s"], r["user_id"], r["key_id"], r["model"], r["user_group"],
               r["status"]): Counter({k: r[k] for k in ("calls", "stream_calls", *SUMMED) if r[k]})
              for r in await storage._fetch("SELECT * FROM usage_rollups")}
    assert rolled == {k: +v for k, v in expected.items()}
    totals: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    for (span, start, _, _, model, group, status), sums in expected.items():
        totals[(span, start, model, group, status)] += sums
    assert {(r["span_s"], r["start_s"], r["model"], r["user_group"], r["status"]):
            Counter({k: r[k] for k in ("calls", "stream_calls", *SUMMED) if r[k]})
            for r in await storage._fetch("SELECT * FROM usage_totals")} == {k: +v for k, v in totals.items()}
    names = ("calls", "errors", "use_time_ms", "first_byte_ms", "first_byte_calls")
    rolled_up = {(r["span_s"], r["start_s"], r["upstream"]): Counter({k: r[k] for k in names if r[k]})
                 for r in await storage._fetch("SELECT * FROM upstream_rollups")}
    assert rolled_up == {k: +v for k, v in upstream.items()}
    return len(raw)


def _matches(row: Any, where: LogFilter) -> bool:
    return all((
        where.user_id is None or row["user_id"] == where.user_id,
        where.key_id is None or row["key_id"] == where.key_id,
        where.model is None or row["model"] == where.model,
        where.status is None or row["status"] == where.status,
        where.since is None or row["created_at"] >= where.since,
        where.until is None or row["created_at"] < where.until))


async def test_rollups_equal_raw_rows_and_totals_match_counts(gateway_server: Any, make_config: Any,
                                                              database_url: str) -> None:
    gw = await _gateway(gateway_server, make_config, database_url)
    storage: SqlStorage = gw.gateway.storage
    rng = random.Random(34)
    await _random_calls(gw, rng, 40)
    now = time.time()
    await storage.write_logs(_old_rows(gw.user["id"], gw.key_record["id"], now, hours=60, per_hour=5))
    assert await _assert_rollups_match(storage) >= 340
    raw = await _raw(storage)
    statuses = sorted({r["status"] for r in raw})
    assert {200, 401, 404}.issubset(statuses)
    for _ in range(40):
        since = rng.choice([None, now - rng.uniform(0, 70 * HOUR_S)])
        until = rng.choice([None, now - rng.uniform(-HOUR_S, 50 * HOUR_S)])
        where = LogFilter(user_id=rng.choice([None, gw.user["id"]]),
                          key_id=rng.choice([None, gw.key_record["id"]]),
                          model=rng.choice([None, "sim-chat", "sim-gemini"]),
                          status=rng.choice([None, *statuses]), since=None if since is None else int(since),
                          until=None if until is None else int(until))
        fields = (("user_id", where.user_id), ("key_id", where.key_id), ("model", where.model),
                  ("status", where.status), ("since", where.since), ("until", where.until))
        query = "&".join(f"{k}={v}" for k, v in fields if v is not None)
        answer = (await gw.admin("GET", f"/admin/logs?{query}&page_size=5")).json()
        assert answer["total"] == sum(_matches(r, where) for r in raw), query
    refused = (await gw.admin("GET", "/admin/logs?status=401")).json()
    assert refused["total"] >= 1 and all(r["user_id"] is None for r in refused["data"])


async def test_retention_prunes_in_batches_and_rollups_stay(gateway_server: Any, make_config: Any,
                                                            database_url: str) -> None:
    gw = await _gateway(gateway_server, make_config, database_url,
                        logs={"retain_days": 1, "prune_batch": 7})
    storage: SqlStorage = gw.gateway.storage
    now = time.time()
    rows = _old_rows(gw.user["id"], gw.key_record["id"], now, hours=40, per_hour=6)
    await storage.write_logs(rows)
    usage = f"/admin/usage?bucket=day&since={int(now) - 5 * DAY_S}"
    before = await gw.admin("GET", usage)
    assert before.status == 200, before.text
    steps: list[int] = []
    real = storage.prune_logs

    async def counted(*args: Any) -> Any:
        step = await real(*args)
        steps.append(step.deleted)
        return step

    storage.prune_logs = counted  # type: ignore[method-assign]
    retention: LogRetention = gw.gateway.extensions[RETENTION]
    rival = LogRetention(storage, gw.gateway.config.logs, "another-replica")
    first = await storage.prune_logs(now - 86400, "another-replica", 1, 60.0)  # the rival holds the lease
    assert first.held and first.deleted == 1
    assert await retention.prune_once(now) == 0  # not this process's turn
    await storage.release_prune_lease("another-replica")
    deleted = await retention.prune_once(now)
    cutoff = span_start(now - 86400, HOUR_S)
    old = [r for r in rows if r.created_at < cutoff]
    assert deleted + 1 == len(old) and max(steps) <= 7 and len([s for s in steps if s]) >= len(old) // 7
    left = await storage._fetch("SELECT MIN(created_at) AS t, COUNT(*) AS n FROM request_logs")
    assert left[0]["t"] >= cutoff and left[0]["n"] == len(rows) - len(old)
    # The roll-ups keep every row; the log's totals count what is left.
    after = await gw.admin("GET", usage)
    assert after.json()["totals"] == before.json()["totals"]
    assert after.json()["totals"]["calls"] == len(rows)
    listed = (await gw.admin("GET", "/admin/logs?page_size=1")).json()
    assert listed["total"] == len(rows) - len(old)
    for status in (200, 429, 404):
        page = (await gw.admin("GET", f"/admin/logs?status={status}&page_size=1")).json()
        assert page["total"] == sum(1 for r in rows if r.status == status and r.created_at >= cutoff)
    assert await rival.prune_once(now) == 0  # nothing left to prune


async def test_usage_endpoint_shape(gateway_server: Any, make_config: Any, database_url: str) -> None:
    gw = await _gateway(gateway_server, make_config, database_url)
    for _ in range(3):
        assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=gw.key)).status == 200
    unknown = await gw.request("POST", "/v1/chat/completions", json={**CHAT, "model": "nope"}, key=gw.key)
    assert unknown.status == 404
    for bucket in ("hour", "day", "month"):
        answer = await gw.admin("GET", f"/admin/usage?bucket={bucket}&group_by=model")
        assert answer.status == 200, answer.text
        body = answer.json()
        assert body["object"] == "usage" and body["bucket"] == bucket and body["group_by"] == "model"
        assert body["since"] < body["until"]
        by_model = {s["key"]: s for s in body["series"]}
        chat = by_model["sim-chat"]
        assert chat["totals"]["calls"] == 3 and chat["totals"]["errors"] == 0
        totals = chat["totals"]
        assert totals["cost_nano"] > 0 and totals["cost_usd"] == totals["cost_nano"] / 1e9
        assert by_model["nope"]["totals"]["errors"] == 1
        assert body["totals"]["calls"] == 4 and len(chat["points"]) == 1
        point = chat["points"][0]
        assert point["start"] >= body["since"] and point["input_tokens"] > 0 and point["output_tokens"] > 0
    users = (await gw.admin("GET", f"/admin/usage?group_by=user&user_id={gw.user['id']}")).json()
    assert [s["key"] for s in users["series"]] == [gw.user["id"]]
    upstreams = (await gw.admin("GET", "/admin/usage?bucket=hour&group_by=upstream")).json()
    up = next(s for s in upstreams["series"] if s["key"] == "sim-openai")
    assert up["totals"]["calls"] == 3 and up["totals"]["first_byte_calls"] == 3
    assert up["totals"]["latency_ms_sum"] >= 0 and up["totals"]["input_tokens"] == 0
    for bad in ("bucket=week", "group_by=colour", "since=10&until=5", "bucket=hour&since=0",
                "group_by=upstream&model=sim-chat"):
        refused = await gw.admin("GET", f"/admin/usage?{bad}")
        assert refused.status == 400 and refused.json()["error"]["code"] == "invalid_request", bad
    assert (await gw.request("GET", "/admin/usage", key=gw.key)).status == 401
    document = (await gw.request("GET", "/openapi.json")).json()
    assert "/admin/usage" in document["paths"] and "UsageAnswer" in document["components"]["schemas"]


@pytest.mark.parametrize("where", [
    LogFilter(), LogFilter(user_id=1), LogFilter(key_id=1), LogFilter(model="sim-chat"),
    LogFilter(status=429),
    LogFilter(request_id="req_old_1_1"), LogFilter(since=1000, until=2000), LogFilter(user_id=1, since=1000)])
async def test_log_queries_use_the_indexes(gateway_server: Any, make_config: Any, tmp_path: Any,
                                           where: LogFilter) -> None:
    gw = await _gateway(gateway_server, make_config, f"sqlite:///{tmp_path}/plans.db")
    storage: SqlStorage = gw.gateway.storage
    rows = _old_rows(gw.user["id"], gw.key_record["id"], time.time(), hours=30, per_hour=20)
    await storage.write_logs(rows)
    await storage._fetch("ANALYZE")
    clause, args = log_where(where)
    plan = " | ".join(r[3] for r in await storage._fetch(
        f"EXPLAIN QUERY PLAN SELECT * FROM request_logs WHERE {clause} ORDER BY created_at DESC, id DESC "
        "LIMIT 20", args))
    assert "USING INDEX" in plan, plan
    if where.request_id is None:  # rows come in the index's order: no sort of all the matches
        assert "TEMP B-TREE" not in plan, plan
    assert "SCAN request_logs" not in plan or "USING INDEX request_logs_time" in plan, plan
