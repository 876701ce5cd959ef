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
    """The stat's text: its main value (RMB for money) and, below, the USD figure (or what a
    counter counts)."""
    text: str = await page.locator(f"[data-stat={name}]").inner_text()
    return text.split("\n", 1)[1].strip()  # without the label


async def count(page: Any, name: str) -> str:
    """A counter's value alone."""
    return (await stat(page, name)).split("\n", 1)[0].strip()


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
    assert await count(page, "requests-today") == "0"

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
        assert rid in text and "sim-chat" in text and "console-key" in text and "served · 200" in text
        assert float(await row.first.locator("[data-cost]").get_attribute("data-cost")) > 0
        await c.shot(page, "log")

        # The balance went down by what the call cost; the chart has today's bar.
        await goto(page, "#/dashboard", "[data-stat=balance]")
        after = await stat(page, "balance")
        assert money(after, "$") < money(before, "$")
        assert await count(page, "requests-today") == "1" == await count(page, "requests")
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
    await goto(admin, "#/admin/users", f"[data-user='{gw.user['name']}']")
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


async def test_key_settings_and_admin_user_management(gw: Any, console: Any) -> None:
    c = console(gw.base_url)
    page = await c.open(width=390)  # the phone layout works too
    await sign_in(page, "user", gw.user_token)
    await goto(page, "#/keys", f"[data-test=toggle-{gw.key_record['id']}]")
    row = page.locator("tr", has=page.locator(f"[data-test=toggle-{gw.key_record['id']}]"))
    await row.locator("text=Edit").click()
    await page.fill("input[name=name]", "limited")
    await page.fill("input[name=quota_usd]", "1.5")
    await page.uncheck("input[name=model][value=sim-chat]")  # the group's models, ticked for the allowlist
    await page.check("input[name=model][value=sim-claude]")
    await page.check("input[name=model][value=sim-gemini]")
    await page.fill("input[name=allow_ips]", "127.0.0.1, 10.0.0.0/8")
    await page.fill("input[name=expires]", "2030-01-31")
    limits = "rpm" in gw.key_record  # offered only where keys have per-key rate limits
    if limits:
        await page.fill("input[name=rpm]", "30")
    await page.click("[data-test=save-key]")
    await page.wait_for_selector("text=limited")
    key = (await gw.admin("GET", f"/admin/keys/{gw.key_record['id']}")).json()
    assert (key["name"], key["quota_usd"], key["models"], key["allow_ips"]) == (
        "limited", 1.5, ["sim-claude", "sim-gemini"], ["127.0.0.1", "10.0.0.0/8"])
    assert key["expires_at"] == 1896134399  # 2030-01-31 23:59:59 UTC
    assert key.get("rpm") == (30 if limits else None)
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0) as client:
        with pytest.raises(openai.PermissionDeniedError):
            await client.chat.completions.create(model="sim-chat",
                                                 messages=[{"role": "user", "content": "x"}])
    # A bad value is refused with the server's message, naming the field, and nothing changes.
    c.expected_failures.append(f"{gw.base_url}/api/keys/{gw.key_record['id']}")  # the 400 provoked here
    await row.locator("text=Edit").click()
    await page.fill("input[name=allow_ips]", "not-an-ip")
    await page.click("[data-test=save-key]")
    await page.wait_for_selector(".panel .error >> text=allow_ips[0]")
    await c.shot(page, "key-edit-error")
    await page.click(".panel >> text=Cancel")

    # The admin creates a user in the console, then disables them: their key stops.
    admin = await c.open()
    await sign_in(admin, "admin", ADMIN_KEY)
    await goto(admin, "#/admin/users", "[data-test=new-user]")
    await admin.click("[data-test=new-user]")
    await admin.fill("input[name=name]", "made-in-console")
    await admin.fill("input[name=quota_usd]", "4")
    await admin.click("[data-test=save-user]")
    token = (await admin.locator("[data-test=new-user-token]").inner_text()).strip()
    assert token.startswith("ut-")
    await admin.click(".panel >> text=Done")
    await admin.wait_for_selector("[data-user='made-in-console']")
    listed = (await gw.admin("GET", "/admin/users")).json()["data"]
    made = next(u for u in listed if u["name"] == "made-in-console")
    assert made["quota_usd"] == 4
    their_key = (await gw.create_key(made["id"], name="theirs"))["key"]
    user_row = admin.locator("tr", has=admin.locator("[data-user='made-in-console']"))
    await user_row.locator("text=Keys").click()
    await admin.wait_for_selector("main >> text=theirs")
    assert "API keys of made-in-console" in await admin.locator("h1").inner_text()
    await c.shot(admin, "admin-user-keys")
    await goto(admin, "#/admin/users", "[data-user='made-in-console']")
    await user_row.locator("[data-test=toggle-user]").click()
    await admin.click("dialog[open] [data-test=confirm]")
    await admin.wait_for_selector("tr:has([data-user='made-in-console']) >> text=disabled")
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=their_key, max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError):
            await client.models.list()

    # Everyone's log, filtered by user.
    await goto(admin, "#/admin/logs", "form.filters")
    await admin.select_option("select[name=user_id]", str(made["id"]))
    await admin.click("form.filters button[type=submit]")
    # Their only call, if any, is the refusal of their disabled key (refusals are logged too).
    await admin.wait_for_selector(".results >> text=/No calls match|refused/")
    for row in await admin.locator(".results tbody tr").all():
        assert f"made-in-console (#{made['id']})" in await row.inner_text()


async def test_upstream_health_page_shows_a_cool_down(gateway_server: Any, make_config: Any,
                                                      console: Any) -> None:
    from tests.serving import free_port

    dead = {"name": "dead-first", "protocol": "chat", "base_url": f"http://127.0.0.1:{free_port()}",
            "api_key": "sk-x", "models": ["sim-chat"], "priority": -1}
    gw = await gateway_server(make_config(extra_upstreams=[dead]))
    user = await gw.create_user("h")
    key = (await gw.create_key(user["id"]))["key"]
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0) as client:
        await client.chat.completions.create(model="sim-chat", messages=[{"role": "user", "content": "x"}])
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    await goto(page, "#/admin/upstreams", "[data-state=cooling_down]")
    dead_row = await page.locator("tr", has=page.locator("[data-state=cooling_down]")).inner_text()
    assert "dead-first" in dead_row and "cooling down" in dead_row and "100.0% of 1 attempts" in dead_row
    good_row = await page.locator("tr", has=page.locator("text=sim-openai")).inner_text()
    assert "healthy" in good_row and "0.0% of 1 attempts" in good_row and " ms" in good_row
    await c.shot(page, "upstreams-cooling")
