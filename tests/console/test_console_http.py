"""The console's files and JSON views over plain HTTP (no browser): security headers, no path
outside its static folder, and views that only ever show the caller's own data."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import openai
import pytest

from tests.core.envelopes import assert_error


async def test_files_and_headers(gw: Any) -> None:
    page = await gw.request("GET", "/console")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    csp = page.headers["Content-Security-Policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                      "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"):
        assert directive in csp
    assert "unsafe" not in csp
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert "<script" in page.text and "src=\"/console/static/app.js\"" in page.text
    assert "<script>" not in page.text and "style=" not in page.text  # nothing inline
    script = await gw.request("GET", "/console/static/app.js")
    assert script.status == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert script.headers["Content-Security-Policy"] == csp
    for bad in ("../__init__.py", "..%2F__init__.py", "%2e%2e/views.py", "views.py", ".hidden.js", "nope.js",
                "index.html/x"):
        reply = await gw.request("GET", f"/console/static/{bad}")
        assert reply.status == 404, (bad, reply.status)


async def test_views_show_only_the_callers_data(gw: Any) -> None:
    other = await gw.create_user("other", quota_usd=5)
    other_key = (await gw.create_key(other["id"]))["key"]
    for key in (gw.key, other_key):
        async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
            await client.chat.completions.create(model="sim-chat",
                                                 messages=[{"role": "user", "content": "hi"}])
    for _ in range(200):
        logs = (await gw.request("GET", "/api/console/logs", key=gw.user_token)).json()
        if logs["total"]:
            break
        await asyncio.sleep(0.01)
    assert logs["total"] == 1 and logs["data"][0]["user_id"] == gw.user["id"]
    # A user_id in the query is ignored: the caller's own log only.
    sneaky = (await gw.request("GET", f"/api/console/logs?user_id={other['id']}", key=gw.user_token)).json()
    assert [r["user_id"] for r in sneaky["data"]] == [gw.user["id"]]
    key_filter = await gw.request("GET", f"/api/console/logs?key_id={gw.key_record['id']}&model=sim-chat",
                                  key=gw.user_token)
    assert key_filter.json()["total"] == 1
    err = assert_error(await gw.request("GET", "/api/console/logs?status=abc", key=gw.user_token),
                       "chat", 400, "invalid_request")
    assert err["param"] == "status"

    summary = (await gw.request("GET", "/api/console/summary", key=gw.user_token)).json()
    assert summary["user"]["id"] == gw.user["id"]
    # Both counters count the request log's rows (refusals logged with the user count too).
    assert summary["requests_today"] == summary["requests_total"] >= 1
    assert len(summary["days"]) == 30
    assert summary["days"][-1]["day"] == time.strftime("%Y-%m-%d", time.gmtime())
    spent = summary["days"][-1]["cost_usd"]
    assert spent > 0 and summary["spend_today_usd"] == spent
    assert summary["models"] == [{"model": "sim-chat", "cost_usd": spent}]
    assert summary["user"]["balance_usd"] == pytest.approx(100 - spent, abs=1e-9)
    assert summary["rmb_per_usd"] == 7.2

    offered = (await gw.request("GET", "/api/console/models", key=gw.user_token)).json()["data"]
    chat = {m["id"]: m["chat"] for m in offered}
    assert chat["sim-chat"] and chat["sim-claude"] and not chat["sim-embed"] and not chat["sim-gemini-embed"]

    assert (await gw.request("GET", "/api/console/tasks", key=gw.user_token)).json() == {
        "data": [], "total": 0, "page": 1, "page_size": 20}
    for path in ("/api/console/summary", "/api/console/logs", "/api/console/tasks", "/api/console/models"):
        assert_error(await gw.request("GET", path), "chat", 401, "invalid_api_key")
        assert_error(await gw.request("GET", path, key=gw.key), "chat", 401, "invalid_api_key")
