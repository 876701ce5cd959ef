"""The admin overview by user on a gateway with more users than ``/admin/usage``'s default ``top``
(issue 34 point 3): the table lists the top spenders and one row for the others, and its CSV
still adds up to the total spend."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

from gateway.accounts.records import RequestLog
from tests.conftest import ADMIN_KEY, GatewayHandle

from .test_console import sign_in


async def test_overview_by_user_sums_the_rest_in_others(gw: GatewayHandle, console: Any) -> None:
    users = [await gw.create_user(f"spender-{i:02}") for i in range(23)]
    now = time.time() - 60
    await gw.gateway.storage.write_logs([RequestLog(
        request_id=f"req_top_{i}", created_at=now, user_id=user["id"], key_id=0, token_name="t",
        route="/v1/chat/completions", family="chat", model="sim-chat", status=200, outcome="success",
        prompt_tokens=1, completion_tokens=1, charge_nano=(i + 1) * 10_000_000, use_time_ms=5)
        for i, user in enumerate(users)])
    usage = (await gw.admin("GET", "/admin/usage?group_by=user")).json()
    assert len(usage["series"]) == 20 and usage["series_count"] == 23

    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)  # admins land on the overview, by user
    await page.wait_for_selector("table:has(caption:text('Usage by user')) tbody tr")
    rows = await page.locator("table:has(caption:text('Usage by user')) tbody tr").all_inner_texts()
    assert len(rows) == 21 and rows[0].startswith("spender-22") and rows[-1].startswith("3 others")
    async with page.expect_download() as download:
        await page.click("[data-test=export-dimension]")
    path = await (await download.value).path()
    exported = list(csv.DictReader(io.StringIO(open(path, encoding="utf-8").read())))  # noqa: ASYNC230
    assert exported[-1]["user"] == "others" and int(exported[-1]["calls"]) == 3
    assert round(sum(float(r["cost_usd"]) for r in exported), 6) == round(usage["totals"]["cost_usd"], 6)
