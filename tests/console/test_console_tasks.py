"""The console's media-task page in headless Chromium: a finished image task shows its status,
progress and picture; its U1 button submits a follow-up (change) task with the chosen key."""

from __future__ import annotations

from typing import Any

from tests.conftest import GatewayHandle
from tests.tasks.helpers import submit, task_config, tgw, wait_task

from .test_console import goto, sign_in

__all__ = ["task_config", "tgw"]  # fixtures


async def test_image_task_and_a_button_follow_up(tgw: GatewayHandle, console: Any) -> None:
    reply = await submit(tgw, "imagine", {"prompt": "a lighthouse at dawn"})
    assert reply.status == 200, reply.text
    first = await wait_task(tgw, reply.json()["result"])
    assert first["status"] == "SUCCESS" and first["imageUrl"].startswith("http")

    c = console(tgw.base_url)
    page = await c.open()
    await sign_in(page, "user", tgw.user_token)
    await goto(page, "#/tasks", f"[data-task='{first['id']}']")
    card = page.locator(f"[data-task='{first['id']}']")
    text = await card.inner_text()
    assert "imagetask · IMAGINE" in text and "SUCCESS 100%" in text
    # The picture, at the gateway's link (CONTRACT 6d), relayed from the simulator's image.
    url = first["imageUrl"]
    assert url.startswith(tgw.base_url + "/v1/media/")
    picture = card.locator(f"img.media[src='{url}']")
    await picture.evaluate("img => img.decode()")  # rejects unless the image loaded
    assert await picture.evaluate("img => img.naturalWidth") == 4
    await c.shot(page, "tasks")

    # U1 with a pasted key (made outside this tab): an UPSCALE task of this image.
    await page.fill("input[name=key-pasted]", tgw.key)
    await card.locator("[data-test=U1]").click()
    await page.wait_for_selector("article.task >> nth=1")
    cards = page.locator("article.task")
    assert await cards.count() == 2
    newest = cards.first
    assert "UPSCALE" in await newest.inner_text()
    follow_up_id = await newest.get_attribute("data-task")
    assert follow_up_id and follow_up_id != first["id"]
    done = await wait_task(tgw, follow_up_id)
    assert done["action"] == "UPSCALE" and done["status"] == "SUCCESS"
    await page.click("text=Refresh")
    await page.wait_for_selector(f"[data-task='{follow_up_id}'] >> text=SUCCESS 100%")
    await c.shot(page, "tasks-follow-up")
