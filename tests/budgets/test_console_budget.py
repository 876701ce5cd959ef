"""The console shows and edits budgets (CONTRACT 7) in headless Chromium: a user sets a budget on
their own key, the admin sets one on a user and clears the key's, and the tables show the budget,
its period and the period's spend."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.conftest import ADMIN_KEY, GatewayHandle
from tests.console.conftest import browser, console
from tests.console.test_console import goto, sign_in

from .conftest import BudgetClock
from .helpers import flat_call, openai_client

__all__ = ["browser", "console"]  # fixtures


async def test_console_sets_shows_and_clears_budgets(flat_gw: GatewayHandle, console: Any,
                                                     budget_clock: BudgetClock) -> None:
    gw = flat_gw
    user = await gw.create_user(quota_usd=5)
    key = await gw.create_key(user["id"], name="budgeted")
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "user", user["user_token"])
    await goto(page, "#/keys", f"[data-test=toggle-{key['id']}]")
    row = page.locator("tr", has=page.locator(f"[data-test=toggle-{key['id']}]"))
    await row.locator("text=Edit").click()
    await page.fill("input[name=budget_usd]", "0.5")
    await page.select_option("select[name=budget_period]", "week")
    await page.click("[data-test=save-key]")
    await page.wait_for_selector("text=$0.50 / week")
    shown = (await gw.admin("GET", f"/admin/keys/{key['id']}")).json()
    assert (shown["budget_usd"], shown["budget_period"]) == (0.5, "week")

    assert "$0.50 / week · $0.00 spent" in await row.inner_text()  # the period's spend, in cents
    async with openai_client(gw, key["key"]) as client:
        await flat_call(client)

    admin = await c.open()
    await sign_in(admin, "admin", ADMIN_KEY)
    await goto(admin, "#/admin/users", f"[data-user='{user['name']}']")
    user_row = admin.locator("tr", has=admin.locator(f"[data-user='{user['name']}']"))
    await user_row.locator("text=Edit").click()
    await admin.fill("input[name=budget_usd]", "2")
    await admin.select_option("select[name=budget_period]", "month")
    await admin.click("[data-test=save-user]")
    await admin.wait_for_selector(f"tr:has([data-user='{user['name']}']) >> text=$2.00 / month")
    me = (await gw.request("GET", "/api/user/self", key=user["user_token"])).json()["data"]
    # The call before was counted while the user had no period: a new period's count starts here.
    assert (me["budget_usd"], me["budget_period"], me["budget_spent_usd"]) == (2.0, "month", 0.0)

    await user_row.locator("text=Keys").click()
    key_row = admin.locator("tr", has=admin.locator("text=budgeted"))
    await key_row.locator("text=Edit").first.click()
    await admin.fill("input[name=budget_usd]", "")
    await admin.click("[data-test=save-key]")
    await admin.wait_for_selector("text=Saved.")
    # "Saved." may still be the user form's, from before: the key's own save is awaited on the API.
    for _ in range(100):
        shown = (await gw.admin("GET", f"/admin/keys/{key['id']}")).json()
        if shown["budget_usd"] is None:
            break
        await asyncio.sleep(0.05)
    assert shown["budget_usd"] is None
