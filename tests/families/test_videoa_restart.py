"""A restart in the middle of media tasks, on SQLite and on PostgreSQL (required with CI=true):
video-A, video-B and music tasks in every billing state (held, charged, refunded) keep the books
clean (``gateway audit``) while running, while no gateway runs, and after a new process picks the
unfinished ones up and charges each exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway.settings.config import Config
from gateway.storage import open_storage
from gateway.storage.rows import DURABLE_HOLDER
from tests.conftest import GatewayHandle, StartGateway
from tests.families.media_helpers import (
    MUSIC_PRICE_NANO,
    VIDEOA_PRICE_NANO,
    VIDEOS_PRICE_NANO,
    ledger_kinds,
    media_config,
)
from tests.tasks.helpers import balance_nano, database_url, pg_database, wait_stored, with_user

__all__ = ["database_url", "media_config", "pg_database"]  # fixtures

METERING = {"heartbeat_s": 0.2, "stale_after_s": 0.6}


async def _post(gw: GatewayHandle, path: str, body: dict[str, Any]) -> Any:
    reply = await gw.request("POST", path, json=body, key=gw.key)
    assert reply.status == 200, reply.text
    return reply.json()


async def _videoa(gw: GatewayHandle, prompt: str) -> str:
    body = {"model": "videoa-2-0", "input": {"prompt": prompt}}
    return str((await _post(gw, "/videoa/v1/videos/generations", body))["taskId"])


async def _videos(gw: GatewayHandle, prompt: str) -> str:
    body = {"model": "videos-standard", "prompt": prompt, "seconds": 5}
    return str((await _post(gw, "/v1/videos", body))["id"])


async def _music(gw: GatewayHandle, prompt: str) -> str:
    return str((await _post(gw, "/music/submit/music", {"prompt": prompt}))["data"])


async def test_restart_in_the_middle_of_media_tasks(gateway_server: StartGateway, database_url: str,
                                                    media_config: Callable[..., Config]) -> None:
    config = media_config(database=database_url, metering=METERING)
    first = await with_user(await gateway_server(config))
    before = await balance_nano(first)
    slow = [await _videoa(first, "long take sim:dur5000"), await _videos(first, "long take sim:dur5000"),
            await _music(first, "long song sim:dur5000")]
    charged = [await _videoa(first, "quick"), await _videos(first, "quick"), await _music(first, "quick")]
    refunded = [await _videoa(first, "x sim:taskfail"), await _videos(first, "x sim:taskfail"),
                await _music(first, "x sim:taskfail")]
    for task_id in charged:
        await wait_stored(first, task_id, lambda t: t.billing_status == "charged")
    for task_id in refunded:
        await wait_stored(first, task_id, lambda t: t.billing_status == "refunded")
    running = [await wait_stored(first, t, lambda t: t.status in ("generating", "processing", "STREAMING",
                                                                   "FIRST_SUCCESS", "TEXT_GENERATING"))
               for t in slow]
    assert all(t.billing_status == "reserved" for t in running)
    assert await first.gateway.storage.audit() == []  # every state at once
    held = 5 * VIDEOA_PRICE_NANO + 5 * VIDEOS_PRICE_NANO + MUSIC_PRICE_NANO
    assert (await balance_nano(first))[0] == before[0] - 2 * held
    await first.stop()
    # With no gateway running, the three holds outlive their process and the books add up.
    storage = open_storage(database_url)
    await storage.open()
    try:
        holds = await storage.open_reservations()
        assert sorted(h.request_id for h in holds) == sorted(t.request_id for t in running)
        assert {h.instance for h in holds} == {DURABLE_HOLDER}
        assert await storage.audit() == []
    finally:
        await storage.close()
    await asyncio.sleep(METERING["stale_after_s"] + 0.1)  # the first process is long silent
    second = await gateway_server(config)
    second.user, second.key_record = first.user, first.key_record
    done = [await wait_stored(second, t, lambda t: t.billing_status == "charged") for t in slow]
    for task in done:
        assert await ledger_kinds(second, task.request_id) == ["reserve", "settle"]
    assert await balance_nano(second) == (before[0] - 2 * held, before[1] + 2 * held)
    assert await second.gateway.storage.open_reservations() == []
    assert await second.gateway.storage.audit() == []
    # What the clients see after the restart.
    reply = await second.request("GET", f"/videoa/v1/tasks/{slow[0]}", key=second.key)
    assert reply.json()["billing_status"] == "charged" and reply.json()["data"]["results"]
    video = (await second.request("GET", f"/v1/videos/{slow[1]}", key=second.key)).json()
    assert video["status"] == "completed"
    music = (await second.request("GET", f"/music/fetch/{slow[2]}", key=second.key)).json()["data"]
    assert music["status"] == "SUCCESS" and len(music["clips"]) == 2
