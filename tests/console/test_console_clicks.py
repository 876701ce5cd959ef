"""Money- and key-making buttons of the console, double- and triple-clicked in headless Chromium
(issue 35 point 1): the API moves once per submission (ledger rows, users, keys, tasks, calls),
each submission carries a fresh Idempotency-Key, and the button is disabled while in flight."""

from __future__ import annotations

from typing import Any

from tests.conftest import ADMIN_KEY, GatewayHandle
from tests.tasks.helpers import task_config, tgw

from .test_console import goto, sign_in

__all__ = ["task_config", "tgw"]  # fixtures

# Three ways to hammer a button: a real double click, a triple click, and three click() calls in
# one turn of the page's event loop (faster than any mouse).
HAMMERS = ("dblclick", "triple", "burst")


async def hammer(page: Any, selector: str, how: str) -> None:
    if how == "dblclick":
        await page.dblclick(selector)
    elif how == "triple":
        await page.click(selector, click_count=3)
    else:
        await page.eval_on_selector(selector, "b => { b.click(); b.click(); b.click(); }")


def idempotency_keys(page: Any, method: str, path: str) -> list[str]:
    """Collects the Idempotency-Key of every ``method path`` request the page sends."""
    seen: list[str] = []

    def note(request: Any) -> None:
        if request.method == method and request.url.split("?")[0].endswith(path):
            seen.append(request.headers.get("idempotency-key", ""))

    page.on("request", note)
    return seen


async def ledger(gw: GatewayHandle, user_id: int) -> list[Any]:
    rows: list[Any] = await gw.gateway.storage._fetch(  # type: ignore[attr-defined]
        "SELECT delta_nano FROM ledger WHERE kind = 'adjust' AND user_id = ?", (user_id,))
    return rows


async def test_admin_money_and_key_buttons_move_once(gw: GatewayHandle, console: Any) -> None:
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    user_id = gw.user["id"]

    # Adjust balance, once per hammering: three submissions, three ledger rows, never more.
    sent = idempotency_keys(page, "POST", f"/admin/users/{user_id}/adjust")
    for n, how in enumerate(HAMMERS, start=1):
        await goto(page, "#/admin/users", f"[data-user='{gw.user['name']}']")
        row = page.locator("tr", has=page.locator(f"[data-user='{gw.user['name']}']"))
        await row.locator("[data-test=adjust]").click()
        await page.fill("[data-test=amount]", "1")
        await page.fill("[data-test=reason]", f"goodwill {n}")
        await hammer(page, "[data-test=save-user]", how)
        await page.wait_for_selector(f"[data-balance='{100 + n}']")
        assert len(await ledger(gw, user_id)) == n, how
    assert len(sent) == 3 and len(set(sent)) == 3 and all(k.startswith("console-") for k in sent)
    user = (await gw.admin("GET", f"/admin/users/{user_id}")).json()
    assert user["quota_usd"] == 103
    await c.shot(page, "clicks-adjusted")

    # New user: one user per submission, one token dialog.
    for n, how in enumerate(HAMMERS):
        await goto(page, "#/admin/users", "[data-test=new-user]")
        await page.click("[data-test=new-user]")
        await page.fill("input[name=name]", f"clicked-{n}")
        await hammer(page, "[data-test=save-user]", how)
        await page.wait_for_selector("[data-test=new-user-token]")
        assert await page.locator("dialog[open]").count() == 1
        await page.click("dialog[open] >> text=Done")
    names = [u["name"] for u in (await gw.admin("GET", "/admin/users")).json()["data"]]
    assert sorted(n for n in names if n.startswith("clicked-")) == ["clicked-0", "clicked-1", "clicked-2"]

    # A key for the user from the admin's keys page: one key per submission.
    before = len((await gw.admin("GET", f"/admin/keys?user_id={user_id}")).json()["data"])
    for n, how in enumerate(HAMMERS, start=1):
        await goto(page, f"#/admin/keys?user={user_id}", "[data-test=new-key-button]")
        await page.click("[data-test=new-key-button]")
        await page.fill("input[name=name]", f"admin-key-{n}")
        await page.check("input[name=model][value=sim-chat]")
        await hammer(page, "[data-test=save-key]", how)
        await page.wait_for_selector("[data-test=new-key]")
        assert (await page.locator("[data-test=new-key]").inner_text()).startswith("sk-")
        await page.click("[data-test=close-key]")
        listed = (await gw.admin("GET", f"/admin/keys?user_id={user_id}")).json()["data"]
        assert len(listed) == before + n, how
    assert all(k["models"] == ["sim-chat"] for k in listed if k["name"].startswith("admin-key-"))


async def test_user_key_button_moves_once(gw: GatewayHandle, console: Any) -> None:
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "user", gw.user_token)
    sent = idempotency_keys(page, "POST", "/api/keys")
    for n, how in enumerate(HAMMERS, start=1):
        await goto(page, "#/keys", "[data-test=new-key-button]")
        await page.click("[data-test=new-key-button]")
        await page.fill("input[name=name]", f"mine-{n}")
        await hammer(page, "[data-test=save-key]", how)
        await page.wait_for_selector("[data-test=new-key]")
        assert await page.locator("dialog[open]").count() == 1  # one "shown once" dialog
        await page.click("[data-test=close-key]")
        keys = (await gw.request("GET", "/api/keys", key=gw.user_token)).json()["data"]
        assert sorted(k["name"] for k in keys if k["name"].startswith("mine-")) == [
            f"mine-{i}" for i in range(1, n + 1)], how
    assert len(set(sent)) == len(sent) == 3


async def test_imagine_and_send_move_once(tgw: GatewayHandle, console: Any) -> None:
    c = console(tgw.base_url)
    page = await c.open()
    await sign_in(page, "user", tgw.user_token)
    # Imagine: a task per submission, whatever the clicking.
    await goto(page, "#/tasks", "text=Submit with")
    await page.fill("input[name=key-pasted]", tgw.key)
    await page.fill("input[name=prompt]", "a lighthouse")
    await hammer(page, "form.inline-form button[type=submit]", "burst")
    await page.wait_for_selector("article.task")
    tasks = (await tgw.request("GET", "/api/console/tasks", key=tgw.user_token)).json()
    assert tasks["total"] == 1

    # The playground's Send: one call per message.
    await goto(page, "#/playground", "[data-test=send]")
    await page.fill("input[name=key-pasted]", tgw.key)
    await page.dispatch_event("input[name=key-pasted]", "change")
    await page.wait_for_selector("[data-test=model-select] option[value=sim-chat]", state="attached")
    await page.fill("textarea[name=prompt]", "sim:echo once")
    await hammer(page, "[data-test=send]", "triple")
    await page.wait_for_selector("[data-test=done]")
    assert await page.locator("[data-test=answer]").count() == 1
    for _ in range(50):
        logs = (await tgw.request("GET", "/api/console/logs?model=sim-chat", key=tgw.user_token)).json()
        if logs["total"]:
            break
        await page.wait_for_timeout(100)
    assert logs["total"] == 1
