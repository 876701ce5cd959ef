"""WCAG 2.1 AA in headless Chromium (issue 35 point 4): axe-core, vendored under
``tests/console/vendor/`` and injected by this test (never served by the console), finds no
violation on any page, at 1280 and 390 px, nor in the dialogs; dialogs trap focus, close on
Escape and give focus back; navigation moves focus to the content. Screenshots of every page at
both widths go to ``tests/console/screenshots/``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import openai

from tests.conftest import ADMIN_KEY, GatewayHandle

from .test_console import goto, sign_in

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe-core 4.14.1
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

USER_PAGES = [("#/dashboard", "[data-stat=balance]", "dashboard"),
              ("#/keys", "[data-test=new-key-button]", "keys"),
              ("#/logs", ".results table", "logs"), ("#/tasks", "text=Submit with", "tasks"),
              ("#/playground", "[data-test=send]", "playground")]
ADMIN_PAGES = [("#/admin/overview", "[data-stat=spend]", "admin-overview"),
               ("#/admin/users", "[data-test=new-user]", "admin-users"),
               ("#/admin/keys", "[data-test=new-key-button]", "admin-keys"),
               ("#/admin/logs", ".results table", "admin-logs"),
               ("#/admin/upstreams", "[data-state]", "admin-upstreams"),
               ("#/admin/models", "text=sim-chat", "admin-models"),
               ("#/admin/groups", "text=default", "admin-groups")]


def axe_source() -> str:
    data = AXE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == AXE_SHA256, "tests/console/vendor/axe.min.js changed"
    return data.decode()


async def violations(page: Any) -> list[str]:
    """axe-core's WCAG 2.1 A and AA violations of the page as it is now, one line each."""
    if not await page.evaluate("() => typeof window.axe === 'object'"):
        # Evaluated through the DevTools protocol: the page's CSP (no inline script) still holds
        # for everything the page itself loads.
        await page.evaluate(axe_source() + "\n;undefined")
    found: list[dict[str, Any]] = await page.evaluate(
        "async (tags) => (await axe.run(document, {runOnly: {type: 'tag', values: tags}})).violations"
        ".map(v => ({id: v.id, help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))",
        TAGS)
    return [f"{v['id']}: {v['help']} at {v['nodes']}" for v in found]


async def check(c: Any, page: Any, name: str) -> None:
    """No violation at either width; screenshots of both."""
    problems: list[str] = []
    original = page.viewport_size
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900})
        await page.wait_for_timeout(50)
        problems += [f"{name} at {width} px: {v}" for v in await violations(page)]
    await page.set_viewport_size(original)
    await c.shot(page, name)
    assert not problems, "\n".join(problems)


async def some_traffic(gw: GatewayHandle) -> None:
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0) as client:
        await client.chat.completions.create(model="sim-chat", messages=[{"role": "user", "content": "hi"}])
        await client.chat.completions.create(model="sim-claude", messages=[{"role": "user", "content": "hi"}])
    await gw.gateway.meter.flush()


async def test_every_page_passes_axe(gw: GatewayHandle, console: Any) -> None:
    await some_traffic(gw)
    c = console(gw.base_url)
    page = await c.open()
    await page.wait_for_selector("[data-test=secret]")
    await check(c, page, "signin")
    await sign_in(page, "user", gw.user_token)
    for route, ready, name in USER_PAGES:
        await goto(page, route, ready)
        await check(c, page, name)
    # A dialog, open: the page under it is inert and the dialog itself passes.
    await goto(page, "#/keys", "[data-test=new-key-button]")
    await page.click("[data-test=new-key-button]")
    await page.wait_for_selector("dialog[open]")
    await check(c, page, "dialog-new-key")
    await page.keyboard.press("Escape")

    admin = await c.open()
    await sign_in(admin, "admin", ADMIN_KEY)
    for route, ready, name in ADMIN_PAGES:
        await goto(admin, route, ready)
        await check(c, admin, name)
    await goto(admin, "#/admin/logs", "[data-test=log-details]")
    await admin.locator("[data-test=log-details]").first.click()
    await admin.wait_for_selector("[data-test=log-detail]")
    detail = await admin.locator("[data-test=log-detail]").inner_text()
    assert "User\nu (#" in detail and "Time to first byte" in detail and "Client IP" in detail
    await check(c, admin, "dialog-log-detail")


async def test_axe_finds_what_it_should(gw: GatewayHandle, console: Any) -> None:
    """The check itself works: a contrast failure and an unnamed button are found."""
    c = console(gw.base_url)
    page = await c.open()
    await page.wait_for_selector("[data-test=secret]")
    await page.evaluate("""() => {
      const b = document.createElement('button'); document.getElementById('app').append(b);
      const p = document.createElement('p'); p.textContent = 'faint'; p.className = 'badge';
      p.setAttribute('class', 'x'); p.style.color = '#ddd'; document.getElementById('app').append(p);
    }""")
    found = " ".join(await violations(page))
    assert "button-name" in found and "color-contrast" in found


async def test_dialogs_trap_and_return_focus(gw: GatewayHandle, console: Any) -> None:
    c = console(gw.base_url)
    page = await c.open()
    await sign_in(page, "admin", ADMIN_KEY)
    # Navigation puts focus on the content.
    await goto(page, "#/admin/users", "[data-test=new-user]")
    assert await page.evaluate("() => document.activeElement.id") == "app"

    opener = page.locator("[data-test=new-user]")
    await opener.focus()
    await page.keyboard.press("Enter")
    await page.wait_for_selector("dialog[open]")
    inside = "() => !!document.activeElement.closest('dialog[open]')"
    assert await page.evaluate(inside)  # focus moved into the dialog
    for _ in range(12):  # Tab and Shift+Tab never leave it
        await page.keyboard.press("Tab")
        assert await page.evaluate(inside)
    for _ in range(12):
        await page.keyboard.press("Shift+Tab")
        assert await page.evaluate(inside)
    await page.keyboard.press("Escape")
    assert await page.locator("dialog").count() == 0
    await page.wait_for_function("() => document.activeElement.dataset.test === 'new-user'")

    # Row actions are named after their row; the confirmation is a dialog too.
    name = gw.user["name"]
    assert await page.get_by_role("button", name=f"Delete {name}").count() == 1
    await page.get_by_role("button", name=f"Disable {name}").click()
    await page.wait_for_selector("dialog[open] [data-test=confirm]")
    await page.keyboard.press("Escape")  # cancelled: nothing changed
    assert (await gw.admin("GET", f"/admin/users/{gw.user['id']}")).json()["enabled"] is True
    await page.wait_for_function("() => document.activeElement.textContent.startsWith('Disable')")
