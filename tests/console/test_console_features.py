"""The console's user-side fixes and admin tools in headless Chromium (issue 35 points 2 and 3):
the playground (chat models only, system prompt, temperature, max tokens, Enter, per-reply usage,
cost and request id, errors in the transcript), music clips as players, a failed task not styled as
a success, zoom and pan on an upscale, an upstream's cool-down ended from its page, CSV export of
the filtered log, and the admin endpoints behind them."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import openai

from tests.conftest import ADMIN_KEY, GatewayHandle, StartGateway
from tests.families.media_helpers import media_config, mgw, poll
from tests.tasks.helpers import submit, task_config, tgw, wait_task

from .test_console import goto, sign_in

__all__ = ["media_config", "mgw", "task_config", "tgw"]  # fixtures


async def test_playground(gw: GatewayHandle, console: Any) -> None:
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "user", gw.user_token)
    await goto(page, "#/playground", "[data-test=send]")
    await page.fill("input[name=key-pasted]", gw.key)
    await page.dispatch_event("input[name=key-pasted]", "change")
    await page.wait_for_selector("[data-test=model-select] option[value=sim-chat]", state="attached")
    offered = await page.locator("[data-test=model-select] option").all_inner_texts()
    assert sorted(offered) == ["sim-chat", "sim-claude", "sim-gemini"]  # no embedding, speech or media model

    bodies: list[dict[str, Any]] = []
    chat_url = f"{gw.base_url}/v1/chat/completions"
    page.on("request", lambda r: bodies.append(json.loads(r.post_data)) if r.url == chat_url else None)
    await page.select_option("[data-test=model-select]", "sim-claude")
    await page.fill("textarea[name=system]", "Answer briefly.")
    await page.fill("input[name=temperature]", "0.3")
    await page.fill("input[name=max_tokens]", "50")
    await page.fill("textarea[name=prompt]", "sim:echo over Enter")
    await page.press("textarea[name=prompt]", "Enter")
    await page.wait_for_selector("[data-test=done]")
    assert await page.locator("[data-test=answer]").inner_text() == "[simulated] sim:echo over Enter"
    sent = bodies[0]
    assert sent["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert (sent["model"], sent["temperature"], sent["max_tokens"], sent["stream"]) == (
        "sim-claude", 0.3, 50, True)
    rid = await page.locator("[data-test=reply-request-id]").inner_text()
    meta = await page.locator(".msg-meta").inner_text()
    found = await gw.request("GET", f"/api/console/logs?request_id={rid}", key=gw.user_token)
    logged = found.json()["data"][0]
    assert f"{logged['prompt_tokens']} in / {logged['completion_tokens']} out tokens" in meta
    shown = float(meta.split("$", 1)[1].split(" ", 1)[0])
    assert rid.startswith("req_") and logged["cost_usd"] > 0 and abs(shown - logged["cost_usd"]) < 1e-6

    # A refusal is shown in the transcript, where the reply would be, with its request id.
    c.expected_failures.append(f"{gw.base_url}/v1/chat/completions")
    await page.fill("input[name=max_tokens]", "1000000000")
    await page.fill("textarea[name=prompt]", "too big")
    await page.click("[data-test=send]")
    error = page.locator("[data-test=reply-error]")
    await error.wait_for()
    assert "req_" in await error.inner_text()
    assert await page.locator(".msg.assistant.failed [data-test=answer]").count() == 0  # no empty bubble
    await c.shot(page, "playground-reply-and-error")


async def test_music_clips_play_and_a_failed_task_is_not_green(mgw: GatewayHandle, console: Any) -> None:
    ids = []
    for prompt in ("a shanty", "a storm sim:taskfail"):
        reply = await mgw.request("POST", "/music/submit/music", json={"prompt": prompt, "model": "music_v4"},
                                  key=mgw.key)
        assert reply.status == 200, reply.text
        ids.append(reply.json()["data"])
    for task_id in ids:
        await poll(mgw, f"/music/fetch/{task_id}", lambda b: b["data"]["status"] in ("SUCCESS", "FAILURE"))
    c = console(mgw.base_url)
    page = await c.open()
    await sign_in(page, "user", mgw.user_token)
    await goto(page, "#/tasks", f"[data-task='{ids[1]}']")
    played = page.locator(f"[data-task='{ids[0]}'] audio")
    assert await played.count() >= 1
    src = await played.first.get_attribute("src")
    assert src and src.startswith(mgw.base_url + "/v1/media/")
    assert await played.first.get_attribute("aria-label")
    ok = await page.locator(f"[data-task='{ids[0]}'] .badge").get_attribute("class")
    failed = await page.locator(f"[data-task='{ids[1]}'] .badge").get_attribute("class")
    assert ok is not None and failed is not None and "ok" in ok.split() and "bad" in failed.split()
    await c.shot(page, "tasks-music")


async def test_an_upscale_offers_zoom_and_pan(tgw: GatewayHandle, console: Any) -> None:
    first = await wait_task(tgw, (await submit(tgw, "imagine", {"prompt": "a harbour"})).json()["result"])
    upscale = await submit(tgw, "change", {"taskId": first["id"], "action": "UPSCALE", "index": 1})
    upscaled = await wait_task(tgw, upscale.json()["result"])
    assert upscaled["status"] == "SUCCESS"
    c = console(tgw.base_url)
    page = await c.open()
    await sign_in(page, "user", tgw.user_token)
    await goto(page, "#/tasks", f"[data-task='{upscaled['id']}']")
    card = page.locator(f"[data-task='{upscaled['id']}']")
    labels = await card.locator("button").all_inner_texts()
    assert any("Zoom out 2x" in t for t in labels) and any("Pan left" in t for t in labels)
    await page.fill("input[name=key-pasted]", tgw.key)
    await card.locator("[data-test='Zoom out 2x']").click()
    await page.wait_for_selector("article.task >> nth=2")
    assert "ZOOM" in await page.locator("article.task").first.inner_text()
    await c.shot(page, "tasks-upscale-follow-ups")


async def test_admin_ends_a_cool_down_and_exports_the_log(gateway_server: StartGateway, make_config: Any,
                                                          console: Any) -> None:
    from tests.serving import free_port

    dead = {"name": "dead-first", "protocol": "chat", "base_url": f"http://127.0.0.1:{free_port()}",
            "api_key": "sk-x", "models": ["sim-chat"], "priority": -1}
    gw = await gateway_server(make_config(extra_upstreams=[dead]))
    user = await gw.create_user("h")
    key = (await gw.create_key(user["id"], name="exported"))["key"]
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        for _ in range(3):
            await client.chat.completions.create(model="sim-chat",
                                                 messages=[{"role": "user", "content": "x"}])
    groups = (await gw.admin("GET", "/admin/groups")).json()["data"]
    assert [(g["name"], g["users"]) for g in groups] == [("default", 1)]
    assert (await gw.admin("POST", "/admin/upstreams/nope/reset")).status == 404

    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    await goto(page, "#/admin/upstreams", "[data-state=cooling_down]")
    await page.click("[data-test=reset-dead-first]")
    await page.wait_for_selector("tr:has-text('dead-first') [data-state=healthy]")
    assert (await gw.admin("GET", "/admin/upstreams")).json()["data"][0]["state"] == "healthy"

    # Everyone's log, filtered by user, as a CSV file: every matching row, with the user's name.
    await goto(page, "#/admin/logs", "form.filters")
    await page.select_option("select[name=user_id]", str(user["id"]))
    await page.click("form.filters button[type=submit]")
    await page.wait_for_selector(".results tbody tr")
    async with page.expect_download() as download:
        await page.click("[data-test=export-csv]")
    path = await (await download.value).path()
    rows = list(csv.DictReader(io.StringIO(open(path, encoding="utf-8").read())))  # noqa: ASYNC230
    assert len(rows) == 3 and {r["user_name"] for r in rows} == {"h"}
    assert {r["token_name"] for r in rows} == {"exported"}
    assert all(r["request_id"].startswith("req_") and float(r["cost_usd"]) > 0 for r in rows)

    # The first call failed over from the dead upstream: its detail lists that attempt.
    first = (await gw.admin("GET", f"/admin/logs?user_id={user['id']}")).json()["data"][-1]
    failed = json.loads(first["attempt_log"])
    assert [(a["upstream"], a["status"]) for a in failed] == [("dead-first", None)] and first["attempts"] == 2
    await page.locator("[data-test=log-details]").last.click()
    attempts = await page.locator("[data-test=failed-attempts]").inner_text()
    assert "dead-first: no answer" in attempts
    detail = await page.locator("[data-test=log-detail]").inner_text()
    assert "User\nh (#" in detail and "Key\nexported (#" in detail
    await c.shot(page, "admin-log-detail-failover")
    await c.shot(page, "admin-logs-filtered")


async def test_a_network_failure_reads_as_one(gw: GatewayHandle, console: Any) -> None:
    c = console(gw.base_url)
    c.expected_failures.append(f"{gw.base_url}/admin/upstreams")
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    await page.route("**/admin/upstreams", lambda route: route.abort("connectionrefused"))
    await goto(page, "#/admin/upstreams", ".error")
    text = await page.locator(".error").inner_text()
    assert "could not be reached" in text and "Failed to fetch" not in text


async def test_reload_shows_why_a_config_cannot_be_read(gw: GatewayHandle, console: Any) -> None:
    c = console(gw.base_url)
    c.expected_failures.append(f"{gw.base_url}/admin/reload")  # the 400 provoked here
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    await goto(page, "#/admin/models", "[data-test=reload-config]")
    await page.click("[data-test=reload-config]")  # this test gateway has no config file
    problems = page.locator("dialog[open] pre.problems")
    await problems.wait_for()
    assert "not started from a config file" in await problems.inner_text()
    await c.shot(page, "admin-reload-refused")


async def test_overview_from_the_usage_roll_ups(gw: GatewayHandle, console: Any) -> None:
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0) as client:
        for model in ("sim-chat", "sim-chat", "sim-claude"):
            await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    usage = (await gw.admin("GET", "/admin/usage?bucket=hour")).json()
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)  # admins land on the overview
    await page.wait_for_selector("[data-stat=calls]")
    assert (await page.locator("[data-stat=calls] strong").inner_text()) == "3"
    await page.select_option("select[name=bucket]", "hour")
    await page.select_option("select[name=group_by]", "model")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_selector("text=By model")
    table = await page.locator("table:has(caption:text('Usage by model')) tbody").inner_text()
    assert "sim-chat" in table and "sim-claude" in table
    async with page.expect_download() as download:
        await page.click("[data-test=export-dimension]")
    path = await (await download.value).path()
    rows = list(csv.DictReader(io.StringIO(open(path, encoding="utf-8").read())))  # noqa: ASYNC230
    assert {r["model"]: int(r["calls"]) for r in rows} == {"sim-chat": 2, "sim-claude": 1}
    assert sum(float(r["cost_usd"]) for r in rows) == usage["totals"]["cost_usd"]
    await c.shot(page, "admin-overview-by-model")
