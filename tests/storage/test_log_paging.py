"""Issue 34 point 3, the request log's answers at scale, on SQLite and PostgreSQL through HTTP:
keyset pages (``before`` = the previous page's ``next_before``) on ``/admin/logs`` and
``/api/log/self`` list the same rows as offset pages, ties on the time included; ``/admin/usage``
by user or key keeps the biggest spenders (``top``) and sums the rest in ``others``; the log's
time bounds are SQL literals (a prepared statement's generic plan cannot see a range's size)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from gateway.accounts.records import RequestLog
from gateway.storage.rows import LogFilter
from gateway.storage.sql_common import SqlStorage
from gateway.storage.sql_rollup import HOUR_S
from gateway.storage.sql_usage import log_where
from tests.conftest import ADMIN_KEY


async def _gateway(gateway_server: Any, make_config: Any, database_url: str) -> Any:
    gw = await gateway_server(make_config(database=database_url))
    gw.user = await gw.create_user("pager", quota_usd=100)
    gw.key_record = await gw.create_key(gw.user["id"], name="test")
    return gw


def _row(n: int, user_id: int, key_id: int, created_at: float, charge_nano: int = 1000) -> RequestLog:
    return RequestLog(
        request_id=f"req_page_{user_id}_{n}", created_at=created_at, user_id=user_id, key_id=key_id,
        token_name="test", route="/v1/chat/completions", family="chat", model="sim-chat", status=200,
        outcome="success", prompt_tokens=3, completion_tokens=5, charge_nano=charge_nano, use_time_ms=7,
        upstream="sim-openai", first_byte_ms=3)


async def _walk(gw: Any, path: str, key: str, items_at: str, data_at: str | None) -> tuple[list[str], int]:
    """Every request id of a log answer, page by page through ``next_before``."""
    seen: list[str] = []
    cursor: int | None = None
    pages = 0
    while True:
        query = f"{path}page_size=7" + (f"&before={cursor}" if cursor is not None else "")
        reply = await gw.request("GET", query, key=key)
        assert reply.status == 200, reply.text
        body = reply.json() if data_at is None else reply.json()[data_at]
        assert body["total"] == 40
        seen += [item["request_id"] for item in body[items_at]]
        pages += 1
        cursor = body["next_before"]
        if cursor is None:
            return seen, pages
        assert len(body[items_at]) == 7


async def test_keyset_pages_list_what_offset_pages_list(gateway_server: Any, make_config: Any,
                                                        database_url: str) -> None:
    gw = await _gateway(gateway_server, make_config, database_url)
    other = await gw.create_user("other")
    storage: SqlStorage = gw.gateway.storage
    now = float(int(time.time()) - 2 * HOUR_S)
    # 40 rows of the user, three at a time on the same second (the cursor must break ties by id),
    # written out of time order; the other user's rows in between must never show.
    mine = [_row(n, gw.user["id"], gw.key_record["id"], now - (n // 3) * 61.5) for n in range(40)]
    theirs = [_row(n, other["id"], 0, now - n * 40.0) for n in range(15)]
    await storage.write_logs(mine[20:] + theirs + mine[:20])
    by_offset: list[str] = []
    for page in range(1, 8):
        reply = await gw.admin("GET", f"/admin/logs?user_id={gw.user['id']}&page_size=7&page={page}")
        by_offset += [item["request_id"] for item in reply.json()["data"]]
    assert len(by_offset) == 40 == len(set(by_offset))
    admin_walk, pages = await _walk(gw, f"/admin/logs?user_id={gw.user['id']}&", ADMIN_KEY, "data", None)
    assert (admin_walk, pages) == (by_offset, 6)
    self_walk, _ = await _walk(gw, "/api/log/self?", gw.user["user_token"], "items", "data")
    assert self_walk == by_offset
    at = {r.request_id: r.created_at for r in mine}
    assert [at[rid] for rid in by_offset] == sorted(at.values(), reverse=True)  # newest first

    # A cursor whose row is gone (pruned, or never there) is an empty page, not an error.
    gone = (await gw.admin("GET", "/admin/logs?before=999999999")).json()
    assert gone["data"] == [] and gone["next_before"] is None and gone["total"] == 55
    for path, key in (("/admin/logs?before=", None), ("/api/log/self?before=", gw.user["user_token"])):
        for bad in ("0", "-3", "x", "1.5"):
            reply = (await gw.admin("GET", path + bad) if key is None
                     else await gw.request("GET", path + bad, key=key))
            assert reply.status == 400, (path, bad, reply.text)
            assert "`before`" in reply.text


async def test_usage_by_user_keeps_the_top_spenders(gateway_server: Any, make_config: Any,
                                                    database_url: str) -> None:
    gw = await _gateway(gateway_server, make_config, database_url)
    storage: SqlStorage = gw.gateway.storage
    users = [await gw.create_user(f"spender-{i}") for i in range(24)]
    now = float(int(time.time()) - 3 * HOUR_S)
    rows = [_row(n, user["id"], 0, now - n * HOUR_S, charge_nano=(i + 1) * 1_000_000)
            for i, user in enumerate(users) for n in range(2)]
    await storage.write_logs(rows)
    since = int(now) - 5 * HOUR_S

    default = (await gw.admin("GET", f"/admin/usage?bucket=hour&group_by=user&since={since}")).json()
    assert default["series_count"] == 24 and len(default["series"]) == 20
    assert [s["key"] for s in default["series"]] == [u["id"] for u in reversed(users)][:20]
    others = default["others"]
    assert others["key"] is None and others["totals"]["calls"] == 8
    assert others["totals"]["cost_nano"] == 2 * (1 + 2 + 3 + 4) * 1_000_000
    assert [p["calls"] for p in others["points"]] == [4, 4]  # the four users' points summed per hour
    summed = sum(s["totals"]["cost_nano"] for s in default["series"]) + others["totals"]["cost_nano"]
    assert summed == default["totals"]["cost_nano"] and default["totals"]["calls"] == 48

    three = (await gw.admin("GET", f"/admin/usage?bucket=hour&group_by=user&since={since}&top=3")).json()
    assert [s["key"] for s in three["series"]] == [u["id"] for u in reversed(users)][:3]
    assert three["others"]["totals"]["calls"] == 42
    every = (await gw.admin("GET", f"/admin/usage?bucket=hour&group_by=user&since={since}&top=0")).json()
    assert len(every["series"]) == 24 and every["others"] is None and every["series_count"] == 24
    by_model = (await gw.admin("GET", f"/admin/usage?bucket=day&group_by=model&since={since}")).json()
    assert [s["key"] for s in by_model["series"]] == ["sim-chat"] and by_model["others"] is None
    for bad in ("top=-1", "top=x", "top=10001"):
        refused = await gw.admin("GET", f"/admin/usage?group_by=user&{bad}")
        assert refused.status == 400 and "`top`" in refused.json()["error"]["message"], bad


@pytest.mark.parametrize("where", [LogFilter(since=1000, until=2000.5), LogFilter(user_id=3, since=7)])
def test_log_time_bounds_are_literals(where: LogFilter) -> None:
    clause, args = log_where(where)
    assert "created_at >= " in clause and all(not isinstance(a, float) for a in args)
    assert args == ([3] if where.user_id else [])
    with pytest.raises(ValueError):
        log_where(LogFilter(since=math.nan))
