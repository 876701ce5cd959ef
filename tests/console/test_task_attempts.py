"""A media task's submission records its failed attempts like a text call (issue 35): the task's
request-log row lists each upstream that failed before one accepted it (or all of them, when none
did, with the message its client read), and the console's detail dialog shows them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gateway.settings.config import Config
from tests.conftest import ADMIN_KEY, GatewayHandle, StartGateway
from tests.tasks.helpers import IMAGE_MODEL, image_upstream, submit, task_config, wait_task, with_user

from .test_console import goto, sign_in

__all__ = ["task_config"]  # fixture


async def task_rows(gw: GatewayHandle) -> list[dict[str, Any]]:
    await gw.gateway.meter.flush()
    rows: list[dict[str, Any]] = (await gw.admin("GET", f"/admin/logs?model={IMAGE_MODEL}")).json()["data"]
    return rows


async def test_a_task_that_failed_over_lists_the_failed_attempt(
    gateway_server: StartGateway, simulator: Any, task_config: Callable[..., Config], console: Any
) -> None:
    upstreams = [
        image_upstream(simulator.base_url, "sk-sim-fail503", name="broken", priority=0),
        image_upstream(simulator.base_url, "sk-sim-dur200", name="good", priority=1),
    ]
    gw = await with_user(await gateway_server(task_config(upstreams=upstreams)))
    task_id = (await submit(gw, "imagine", {"prompt": "x"})).json()["result"]
    assert (await wait_task(gw, task_id))["status"] == "SUCCESS"
    [row] = await task_rows(gw)  # written when the task was charged, by the poller
    assert (row["upstream"], row["attempts"], row["outcome"]) == ("good", 2, "success")
    failed = json.loads(row["attempt_log"])
    assert [(a["upstream"], a["status"]) for a in failed] == [("broken", 503)] and failed[0]["error"]
    assert row["error_message"] is None

    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    await goto(page, "#/admin/logs", ".results tbody tr")
    await page.locator("[data-test=log-details]").first.click()
    assert "broken: HTTP 503" in await page.locator("[data-test=failed-attempts]").inner_text()
    await c.shot(page, "task-log-detail-failover")


async def test_a_task_no_upstream_accepted_lists_every_attempt_and_the_message(
    gateway_server: StartGateway, simulator: Any, task_config: Callable[..., Config]
) -> None:
    upstreams = [
        image_upstream(simulator.base_url, "sk-sim-fail503", name="broken-a", priority=0),
        image_upstream(simulator.base_url, "sk-sim-fail503", name="broken-b", priority=1),
    ]
    gw = await with_user(await gateway_server(task_config(upstreams=upstreams)))
    reply = await submit(gw, "imagine", {"prompt": "x"})
    [row] = await task_rows(gw)
    failed = json.loads(row["attempt_log"])
    assert {a["upstream"] for a in failed} == {"broken-a", "broken-b"} and row["attempts"] == len(failed)
    assert row["charge_nano"] == 0 and row["outcome"] != "success"
    assert row["error_message"] and "attempt(s)" in row["error_message"], (row, reply.text)
