"""Issue 35's last console gaps in headless Chromium and through HTTP: a log row keeps the error
message its client read (secrets scrubbed, capped) and the detail dialog shows it; a key's response
cache flag in the admin's and the user's key forms; the ``cache_hit`` and ``shutdown`` outcomes
labelled; the budget columns in the users' and keys' CSV exports."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import openai
import pytest

from gateway.runtime.secrets_scrub import ERROR_MESSAGE_CHARS
from tests.cache.conftest import kept
from tests.conftest import ADMIN_KEY, GatewayHandle, StartGateway

from .test_console import goto, sign_in


def said(err: openai.APIStatusError) -> str:
    """The error's message as the gateway wrote it (the SDK's ``message`` adds the status)."""
    assert isinstance(err.body, dict)
    return str(err.body["message"])


async def logged(gw: GatewayHandle, query: str, count: int = 1) -> list[dict[str, Any]]:
    await gw.gateway.meter.flush()
    rows: list[dict[str, Any]] = (await gw.admin("GET", f"/admin/logs?{query}")).json()["data"]
    assert len(rows) >= count, rows
    return rows


async def test_a_refusal_and_a_failure_keep_the_message_their_client_read(
    gateway_server: StartGateway, make_config: Any, console: Any
) -> None:
    from tests.serving import free_port

    dead = {
        "name": "dead-only",
        "protocol": "chat",
        "base_url": f"http://127.0.0.1:{free_port()}",
        "api_key": "sk-dead",
        "models": {"lonely": "sim-chat"},
    }
    gw = await gateway_server(
        make_config(
            extra_upstreams=[dead],
            extra_models=[{"id": "lonely", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}],
        )
    )
    user = await gw.create_user("m")
    key = (await gw.create_key(user["id"], name="msg"))["key"]
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as unknown:  # a refusal, with a credential in it
            await client.chat.completions.create(
                model="Bearer sk-leakedleaked1234", messages=[{"role": "user", "content": "x"}]
            )
        with pytest.raises(openai.APIStatusError) as failed:  # every upstream failed
            await client.chat.completions.create(model="lonely", messages=[{"role": "user", "content": "x"}])
    rows = await logged(gw, f"user_id={user['id']}", 2)
    by_code = {r["model"]: r for r in rows}
    refused = by_code["Bearer sk-leakedleaked1234"]
    assert refused["error_code"] == unknown.value.code and refused["error_message"]
    assert (
        "sk-leakedleaked1234" not in refused["error_message"]
        and "Bearer REDACTED" in refused["error_message"]
    )
    assert refused["error_message"] == said(unknown.value).replace("sk-leakedleaked1234", "REDACTED")
    upstream = by_code["lonely"]
    assert upstream["error_code"] == failed.value.code and upstream["error_message"] == said(failed.value)
    assert json.loads(upstream["attempt_log"])[0]["upstream"] == "dead-only"

    # A message is capped (a refusal naming a very long model id).
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        with pytest.raises(openai.APIStatusError):
            await client.chat.completions.create(
                model="m" * 5000, messages=[{"role": "user", "content": "x"}]
            )
    longest = max(len(r["error_message"] or "") for r in await logged(gw, f"user_id={user['id']}", 3))
    assert longest == ERROR_MESSAGE_CHARS

    # A success keeps none.
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        await client.chat.completions.create(model="sim-chat", messages=[{"role": "user", "content": "x"}])
    ok = [r for r in await logged(gw, f"user_id={user['id']}&model=sim-chat") if r["status"] == 200]
    assert ok and ok[0]["error_message"] is None

    # The detail dialog shows the message.
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    await goto(page, "#/admin/logs", "form.filters")
    await page.fill("form.filters input[name=model]", "lonely")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_selector(".results tbody tr")
    await page.locator("[data-test=log-details]").first.click()
    shown = await page.locator("[data-test=error-message]").inner_text()
    assert shown == f"{failed.value.code}: {said(failed.value)}"
    await c.shot(page, "log-detail-error-message")


async def test_the_cache_flag_in_both_key_forms_and_the_cache_hit_outcome(
    gw: GatewayHandle, console: Any
) -> None:
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    user_id = gw.user["id"]
    await goto(page, f"#/admin/keys?user={user_id}", "[data-test=new-key-button]")
    await page.click("[data-test=new-key-button]")
    await page.fill("input[name=name]", "cached")
    await page.check("[data-test=key-cache]")
    await page.click("[data-test=save-key]")
    await page.wait_for_selector("[data-test=new-key]")
    full = await page.locator("[data-test=new-key]").inner_text()
    await page.click("[data-test=close-key]")
    keys = (await gw.admin("GET", f"/admin/keys?user_id={user_id}")).json()["data"]
    made = next(k for k in keys if k["name"] == "cached")
    assert made["cache"] is True

    # Two identical calls: the second is a hit, labelled as one in the log. (An answer is handed
    # to the cache as its call ends: the second call waits for the first's to be kept.)
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=full, max_retries=0) as client:
        for _ in range(2):
            await client.chat.completions.create(
                model="sim-chat", messages=[{"role": "user", "content": "same"}]
            )
            await kept(gw)
    assert {r["outcome"] for r in await logged(gw, f"key_id={made['id']}", 2)} == {"success", "cache_hit"}
    await goto(page, "#/admin/logs", "form.filters")
    badge = page.locator("[data-outcome=cache_hit]").first
    await badge.wait_for()
    assert (await badge.inner_text()).startswith("served from cache") and "cache" in (
        await badge.get_attribute("class") or ""
    )
    await c.shot(page, "log-cache-hit")

    # The admin's edit form shows the flag and clears it.
    await goto(page, f"#/admin/keys?user={user_id}", "[data-key=cached]")
    await page.locator("[data-key=cached] button", has_text="Edit").click()
    assert await page.is_checked("[data-test=key-cache]")
    await page.uncheck("[data-test=key-cache]")
    await page.click("[data-test=save-key]")
    await page.wait_for_selector("dialog[open]", state="detached")
    assert (await gw.admin("GET", f"/admin/keys/{made['id']}")).json()["cache"] is False

    # The user's own form: create with the flag, see it in the edit form.
    mine = await c.open()
    await sign_in(mine, "user", gw.user_token)
    await goto(mine, "#/keys", "[data-test=new-key-button]")
    await mine.click("[data-test=new-key-button]")
    await mine.fill("input[name=name]", "mine-cached")
    await mine.check("[data-test=key-cache]")
    await mine.click("[data-test=save-key]")
    await mine.wait_for_selector("[data-test=new-key]")
    await mine.click("[data-test=close-key]")
    own = (await gw.request("GET", "/api/keys", key=gw.user_token)).json()["data"]
    assert next(k for k in own if k["name"] == "mine-cached")["cache"] is True
    await mine.get_by_role("button", name="Edit key mine-cached").click()
    assert await mine.is_checked("[data-test=key-cache]")
    await c.shot(mine, "user-key-cache-flag")


async def test_a_shutdown_row_is_labelled(gw: GatewayHandle, console: Any) -> None:
    """No test can stop the gateway under the console: the row is the API's, with its outcome."""
    row = {
        "request_id": "req_shut",
        "created_at": 1_700_000_000,
        "user_id": gw.user["id"],
        "key_id": 1,
        "token_name": "k",
        "route": "/v1/chat/completions",
        "family": "chat",
        "model": "sim-chat",
        "status": 200,
        "outcome": "shutdown",
        "is_stream": True,
        "upstream": "sim",
        "attempts": 1,
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "cache_write_tokens": 0,
        "cache_read_tokens": 0,
        "reasoning_tokens": 0,
        "usage_estimated": False,
        "charge_nano": 10,
        "use_time_ms": 5,
        "first_byte_ms": 1,
        "ip": "127.0.0.1",
        "error_code": "service_unavailable",
        "uncharged_nano": 0,
        "attempt_log": None,
        "cost_usd": 1e-8,
        "error_message": "The gateway is shutting down: the stream ended before it was complete.",
    }
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)

    async def fake(route: Any) -> None:
        await route.fulfill(json={"data": [row], "total": 1, "page": 1, "page_size": 20})

    await page.route("**/admin/logs?*", fake)
    await goto(page, "#/admin/logs", "[data-outcome=shutdown]")
    badge = page.locator("[data-outcome=shutdown]")
    assert (await badge.inner_text()).startswith("gateway shut down mid-stream")
    assert "warn" in (await badge.get_attribute("class") or "")
    await page.locator("[data-test=log-details]").first.click()
    assert "shutting down" in await page.locator("[data-test=error-message]").inner_text()


async def test_budget_columns_in_the_users_and_keys_exports(gw: GatewayHandle, console: Any) -> None:
    user_id = gw.user["id"]
    await gw.admin("PATCH", f"/admin/users/{user_id}", {"budget_usd": 5, "budget_period": "month"})
    key = await gw.create_key(user_id, name="budgeted", budget_usd=2, budget_period="day")
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)

    async def export(route: str, ready: str) -> list[dict[str, str]]:
        await goto(page, route, ready)
        async with page.expect_download() as download:
            await page.get_by_role("button", name="Export CSV").click()
        path = await (await download.value).path()
        return list(csv.DictReader(io.StringIO(open(path, encoding="utf-8").read())))  # noqa: ASYNC230

    users = await export("#/admin/users", f"[data-user='{gw.user['name']}']")
    mine = next(u for u in users if u["id"] == str(user_id))
    assert (mine["budget_usd"], mine["budget_period"], mine["budget_spent_usd"]) == ("5", "month", "0")
    keys = await export(f"#/admin/keys?user={user_id}", "[data-key=budgeted]")
    budgeted = next(k for k in keys if k["id"] == str(key["id"]))
    assert (budgeted["budget_usd"], budgeted["budget_period"], budgeted["budget_spent_usd"]) == (
        "2",
        "day",
        "0",
    )
    assert budgeted["cache"] == "false"
