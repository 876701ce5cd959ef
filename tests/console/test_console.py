"""The web console end to end in headless Chromium (issue 17): a user signs in, makes a key,
uses it through the openai SDK, finds the call in the log and the balance changed, streams in the
playground, disables the key and sees the SDK refused; an admin tops the user up and the user's
dashboard shows it. Every test fails on any browser console error (``conftest.Console``)."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.conftest import ADMIN_KEY


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def money(text: str, sign: str) -> float:
    match = re.search(re.escape(sign) + r"([0-9]+\.[0-9]+)", text)
    assert match, text
    return float(match.group(1))


async def sign_in(page: Any, role: str, secret: str) -> None:
    await page.select_option("[data-test=role]", role)
    await page.fill("[data-test=secret]", secret)
    await page.click("[data-test=signin]")
    await page.wait_for_selector("[data-test=signout]")


async def stat(page: Any, name: str) -> str:
    """The stat's text: its main value (RMB for money) and, below, the USD figure."""
    text: str = await page.locator(f"[data-stat={name}]").inner_text()
    return text.split("\n", 1)[1].strip()  # without the label


async def goto(page: Any, route: str, ready: str) -> None:
    await page.evaluate("(route) => { location.hash = route; }", route)
    await page.wait_for_selector(ready)


async def test_user_journey(gw: Any, console: Any) -> None:
    c = console(gw.base_url)
    page = await c.open()
    reply = await page.request.get(gw.base_url + "/console")
    csp = reply.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    await page.wait_for_selector("[data-test=secret]")
    await c.shot(page, "signin")

    await sign_in(page, "user", gw.user_token)
    await page.wait_for_selector("[data-stat=balance]")
    before = await stat(page, "balance")
    assert money(before, "$") == 100.0 and money(before, "¥") == 720.0
    assert await stat(page, "requests-today") == "0"

    # A key made in the console, shown once, works with the official SDK.
    await goto(page, "#/keys", "[data-test=new-key-button]")
    await page.click("[data-test=new-key-button]")
    await page.fill("input[name=name]", "console-key")
    await page.click("[data-test=save-key]")
    key = (await page.locator("[data-test=new-key]").inner_text()).strip()
    assert key.startswith("sk-")
    await c.shot(page, "new-key")
    await page.click("[data-test=close-key]")
    await page.wait_for_selector("text=console-key")
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="sim-chat", messages=[{"role": "user", "content": "sim:tokens=40 hello"}])
        rid = raw.headers["x-service-request-id"]
        assert raw.parse().choices[0].message.content

        # The call is in the log (found by its request id) with its tokens and cost.
        await goto(page, "#/logs", "form.filters")
        await page.fill("input[name=request_id]", rid)
        await page.click("form.filters button[type=submit]")
        row = page.locator("tbody tr")
        await row.first.wait_for()
        for _ in range(50):  # settlements are written in batches
            if await row.count() == 1 and rid in await row.first.inner_text():
                break
            await page.click("form.filters button[type=submit]")
            await page.wait_for_timeout(100)
        text = await row.first.inner_text()
        assert rid in text and "sim-chat" in text and "console-key" in text and "200 success" in text
        assert float(await row.first.locator("[data-cost]").get_attribute("data-cost")) > 0
        await c.shot(page, "log")

        # The balance went down by what the call cost; the chart has today's bar.
        await goto(page, "#/dashboard", "[data-stat=balance]")
        after = await stat(page, "balance")
        assert money(after, "$") < money(before, "$")
        assert await stat(page, "requests-today") == "1"
        assert await page.locator("rect.bar:not(.empty)").count() >= 2  # per day and per model
        await c.shot(page, "dashboard")

        # The playground streams an answer with the key made in this tab.
        await goto(page, "#/playground", "[data-test=send]")
        await page.wait_for_selector("[data-test=model-select] option[value=sim-chat]", state="attached")
        await page.select_option("[data-test=model-select]", "sim-chat")
        await page.fill("textarea[name=prompt]", "sim:echo streamed through the console")
        await page.click("[data-test=send]")
        await page.wait_for_selector("[data-test=done]")
        answer = await page.locator("[data-test=answer]").inner_text()
        assert answer == "[simulated] sim:echo streamed through the console"
        await c.shot(page, "playground")

        # Disabled in the console: the SDK is refused at once.
        await goto(page, "#/keys", "[data-test=new-key-button]")
        key_id = (await client_key_id(gw, key))
        await page.click(f"[data-test=toggle-{key_id}]")
        await page.wait_for_selector("text=disabled")
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="sim-chat",
                                                 messages=[{"role": "user", "content": "x"}])
    await c.shot(page, "keys")
    # Screenshots really are of the page at both widths.
    widths = [png_size(path)[0] for path in await c.shot(page, "keys-final")]
    assert widths == [1280, 390]


async def client_key_id(gw: Any, key: str) -> int:
    listed = (await gw.request("GET", "/api/keys", key=gw.user_token)).json()["data"]
    masked = key[:7]
    return next(k["id"] for k in listed if k["masked"].startswith(masked))


async def test_admin_tops_up_and_the_user_sees_it(gw: Any, console: Any) -> None:
    c = console(gw.base_url)
    # A name that is HTML must show as text, never run or render.
    hostile = "<img src=x onerror=alert(1)>"
    created = await gw.create_user(hostile, quota_usd=3)
    admin = await c.open()
    await sign_in(admin, "admin", ADMIN_KEY)
    await admin.wait_for_selector(f"[data-user='{gw.user['name']}']")
    assert await admin.locator("img").count() == 0
    assert hostile in await admin.locator("tbody").inner_text()
    await c.shot(admin, "admin-users")

    row = admin.locator("tr", has=admin.locator(f"[data-user='{gw.user['name']}']"))
    await row.locator("[data-test=adjust]").click()
    await admin.fill("[data-test=amount]", "25.5")
    await admin.fill("[data-test=reason]", "top-up from the console")
    await admin.click("[data-test=save-user]")
    await admin.wait_for_selector("[data-balance='125.5']")
    # The ledger row carries the reason.
    notes = await gw.gateway.storage._fetch("SELECT note FROM ledger WHERE kind = 'adjust' AND user_id = ?",
                                            (gw.user["id"],))
    assert [n["note"] for n in notes] == ["top-up from the console"]

    for route, ready, name in (("#/admin/upstreams", "[data-state=healthy]", "admin-upstreams"),
                               ("#/admin/models", "text=sim-chat", "admin-models"),
                               ("#/admin/logs", "form.filters", "admin-logs")):
        await goto(admin, route, ready)
        await c.shot(admin, name)
        if name == "admin-models":
            assert "input / M tokens: $0.50 · ¥3.60" in await admin.locator("main").inner_text()

    user = await c.open()
    await sign_in(user, "user", gw.user_token)
    await user.wait_for_selector("[data-stat=balance]")
    balance = await stat(user, "balance")
    assert money(balance, "$") == 125.5 and money(balance, "¥") == pytest.approx(125.5 * 7.2)
    await c.shot(user, "user-after-topup")
    assert created["id"] != gw.user["id"]
