"""Music tasks end to end: submit with every field of spec 4.12, fetch one and fetch many (only the
caller's tasks), the statuses and clips of spec 2.5, continuations, callbacks through the engine's
sender and SSRF guard, per-task billing (nothing on failure) and validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gateway.settings.config import Config
from tests.conftest import GatewayHandle, StartGateway
from tests.families.media_helpers import MUSIC_PRICE_NANO, error_of, ledger_kinds, media_config, mgw, poll
from tests.tasks.helpers import balance_nano, until, wait_stored, with_user
from tests.tasks.test_callbacks import Receiver, receiver

__all__ = ["media_config", "mgw", "receiver"]  # fixtures

FINAL = ("SUCCESS", "FAILURE")


async def submit(gw: GatewayHandle, key: str | None = None, **body: Any) -> str:
    reply = await gw.request("POST", "/music/submit/music", json=body, key=key or gw.key)
    assert reply.status == 200, reply.text
    answer = reply.json()
    assert answer["code"] == "success" and answer["message"] == "" and isinstance(answer["data"], str)
    return str(answer["data"])


async def finished(gw: GatewayHandle, task_id: str, key: str | None = None) -> Any:
    body = await poll(gw, f"/music/fetch/{task_id}", lambda b: b["data"]["status"] in FINAL, key=key)
    assert body["code"] == "success"
    return body["data"]


async def test_song_moves_through_every_status(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    task_id = await submit(mgw, prompt="a sea shanty about routers sim:dur3000", tags="folk,shanty",
                           title="Packet Lost", lyric="[Verse]\nheave ho", model="music_v4",
                           make_instrumental=False)
    assert (await balance_nano(mgw))[0] == before[0] - MUSIC_PRICE_NANO  # held at submit
    seen: list[str] = []
    progress: list[int] = []
    while True:
        data = (await mgw.request("GET", f"/music/fetch/{task_id}", key=mgw.key)).json()["data"]
        if not seen or seen[-1] != data["status"]:
            seen.append(data["status"])
        progress.append(data["progress"])
        if data["status"] in FINAL:
            break
        if data["status"] in ("FIRST_SUCCESS", "STREAMING"):
            assert data["clips"] and data["clips"][0]["audio_url"]  # streamable before the end
    assert seen == ["PENDING", "TEXT_GENERATING", "FIRST_SUCCESS", "STREAMING", "SUCCESS"], seen
    assert progress == sorted(progress) and progress[-1] == 100
    assert data["task_id"] == task_id and "failure_reason" not in data
    first, second = data["clips"]
    assert first["id"] == f"{task_id}_1" and second["id"] == f"{task_id}_2"
    assert first["title"] == "Packet Lost" and ".mp3?" in first["audio_url"] and first["duration"] > 0
    assert first["video_url"] and first["image_url"] and first["lyric"] == "[Verse]\nheave ho"
    assert first["tags"] == "folk,shanty" and first["model_name"] == "music_v4"
    assert set(second) == {"id", "title", "audio_url", "duration"}  # the short form of spec 2.5
    async with mgw.http.get(second["audio_url"]) as resp:  # the gateway's signed link (CONTRACT 6d)
        assert resp.status == 200 and resp.content_type == "audio/mpeg"
    stored = await wait_stored(mgw, task_id, lambda t: t.billing_status == "charged")
    assert stored.upstream_task_id not in str(data)
    assert await balance_nano(mgw) == (before[0] - MUSIC_PRICE_NANO, before[1] + MUSIC_PRICE_NANO)
    assert await ledger_kinds(mgw, stored.request_id) == ["reserve", "settle"]


async def test_default_model_and_its_price(mgw: GatewayHandle) -> None:
    task_id = await submit(mgw, prompt="lo-fi beats", make_instrumental=True)
    data = await finished(mgw, task_id)
    assert data["status"] == "SUCCESS" and data["clips"][0]["lyric"] == ""
    stored = await wait_stored(mgw, task_id, lambda t: t.billing_status == "charged")
    assert stored.model == "music_v4" and stored.charged_nano == MUSIC_PRICE_NANO
    cheap = await submit(mgw, prompt="older model", model="music_v3.5")
    await finished(mgw, cheap)
    stored = await wait_stored(mgw, cheap, lambda t: t.billing_status == "charged")
    assert stored.charged_nano == 100_000_000


@pytest.mark.parametrize(("body", "reason"), [
    ({"prompt": "overloaded sim:taskfail"}, "upstream overloaded"),
    ({"prompt": "a ballad", "lyric": "la " * 1200}, "lyrics too long"),
    ({"prompt": "vanishing sim:forget"}, "no longer knows"),
])
async def test_failures_cost_nothing(mgw: GatewayHandle, body: dict[str, Any], reason: str) -> None:
    before = await balance_nano(mgw)
    task_id = await submit(mgw, **body)
    data = await finished(mgw, task_id)
    assert data["status"] == "FAILURE" and reason in data["failure_reason"], data
    stored = await wait_stored(mgw, task_id, lambda t: t.billing_status == "refunded")
    assert await balance_nano(mgw) == before  # balance and used total restored
    assert await ledger_kinds(mgw, stored.request_id) == ["reserve", "release"]
    assert await mgw.gateway.storage.audit() == []


async def test_refused_submission_costs_nothing(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    reply = await mgw.request("POST", "/music/submit/music", json={"prompt": "no sim:reject"}, key=mgw.key)
    assert reply.status == 400 and "rejected" in error_of(reply)["message"]
    assert await balance_nano(mgw) == before


async def test_fetch_many_shows_only_the_callers_tasks(mgw: GatewayHandle) -> None:
    mine = [await submit(mgw, prompt=f"song {i}") for i in range(3)]
    other_user = await mgw.create_user(quota_usd=5)
    other = (await mgw.create_key(other_user["id"]))["key"]
    theirs = await submit(mgw, key=other, prompt="not yours")
    ids = [mine[2], theirs, "unknown", mine[0], mine[2], mine[1]]
    reply = await mgw.request("POST", "/music/fetch", json={"ids": ids}, key=mgw.key)
    assert reply.status == 200, reply.text
    body = reply.json()
    assert body["code"] == "success"
    assert [t["task_id"] for t in body["data"]] == [mine[2], mine[0], mine[1]]
    assert all(set(t) >= {"task_id", "status", "progress", "clips"} for t in body["data"])
    reply = await mgw.request("GET", f"/music/fetch/{theirs}", key=mgw.key)
    assert reply.status == 404 and error_of(reply)["code"] == "task_not_found"
    bad = await mgw.request("POST", "/music/fetch", json={"ids": "x"}, key=mgw.key)
    assert bad.status == 400 and error_of(bad)["param"] == "ids"
    assert (await mgw.request("POST", "/music/fetch", json={"ids": []})).status == 401


async def test_continuation_of_an_own_clip(mgw: GatewayHandle, simulator: Any) -> None:
    parent = await submit(mgw, prompt="an opening", title="Part One")
    data = await finished(mgw, parent)
    clip = data["clips"][1]
    child = await submit(mgw, prompt="the sequel", continue_clip_id=clip["id"], continue_at=30.5)
    done = await finished(mgw, child)
    assert done["status"] == "SUCCESS" and done["action"] == "CONTINUE" and len(done["clips"]) == 1
    parent_task = await mgw.gateway.storage.get_task(parent)
    child_task = await mgw.gateway.storage.get_task(child)
    assert parent_task is not None and child_task is not None
    assert child_task.upstream == parent_task.upstream and child_task.model == parent_task.model
    # The upstream got its own clip id, never the gateway's.
    async with mgw.http.get(simulator.base_url + "/_sim/requests") as resp:
        log = await resp.json()
    sent = [e["body_json_or_null"] for e in log if e["path"] == "/music/submit/music"]
    continued = [b for b in sent if b.get("continue_at") == 30.5]
    assert continued and continued[-1]["continue_clip_id"] not in (None, clip["id"])
    assert "notify_hook" not in continued[-1] and continued[-1]["model"] == "music_v4"
    # Another user cannot continue it; a clip past the end or unknown is refused.
    other_user = await mgw.create_user(quota_usd=5)
    other = (await mgw.create_key(other_user["id"]))["key"]
    for key, body, status in (
        (other, {"continue_clip_id": clip["id"], "continue_at": 1}, 404),
        (mgw.key, {"continue_clip_id": f"{parent}_9", "continue_at": 1}, 404),
        (mgw.key, {"continue_clip_id": "garbage", "continue_at": 1}, 404),
        (mgw.key, {"continue_clip_id": clip["id"], "continue_at": 9999}, 400),
    ):
        reply = await mgw.request("POST", "/music/submit/music", json={"prompt": "more", **body}, key=key)
        assert reply.status == status, reply.text


async def test_continuing_an_unfinished_clip_is_refused(mgw: GatewayHandle) -> None:
    parent = await submit(mgw, prompt="slow one sim:dur3000")
    await poll(mgw, f"/music/fetch/{parent}", lambda b: b["data"]["status"] == "FIRST_SUCCESS")
    reply = await mgw.request("POST", "/music/submit/music", key=mgw.key,
                              json={"prompt": "x", "continue_clip_id": f"{parent}_1", "continue_at": 0})
    assert reply.status == 400 and error_of(reply)["param"] == "continue_clip_id"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "prompt"),
    ({"prompt": " "}, "prompt"),
    ({"prompt": "x" * 3001}, "prompt"),
    ({"prompt": "x", "tags": 5}, "tags"),
    ({"prompt": "x", "title": "t" * 201}, "title"),
    ({"prompt": "x", "lyric": "l" * 5001}, "lyric"),
    ({"prompt": "x", "lyric": "words", "make_instrumental": True}, "lyric"),
    ({"prompt": "x", "make_instrumental": "yes"}, "make_instrumental"),
    ({"prompt": "x", "continue_at": 3}, "continue_clip_id"),
    ({"prompt": "x", "continue_clip_id": "a_1"}, "continue_at"),
    ({"prompt": "x", "continue_clip_id": "a_1", "continue_at": -1}, "continue_at"),
    ({"prompt": "x", "notify_hook": "http://127.0.0.1:9/hook"}, "notify_hook"),
    ({"prompt": "x", "notify_hook": "ftp://example.com/hook"}, "notify_hook"),
    ({"prompt": "x", "mood": "sad"}, "mood"),
])
async def test_bad_fields_are_400_naming_them(mgw: GatewayHandle, body: dict[str, Any], field: str) -> None:
    before = await balance_nano(mgw)
    reply = await mgw.request("POST", "/music/submit/music", json=body, key=mgw.key)
    assert reply.status == 400, reply.text
    assert error_of(reply)["param"] == field, reply.text
    assert await balance_nano(mgw) == before


async def test_unknown_model_is_404(mgw: GatewayHandle) -> None:
    reply = await mgw.request("POST", "/music/submit/music", json={"prompt": "x", "model": "music_v9"},
                              key=mgw.key)
    assert reply.status == 404 and error_of(reply)["code"] == "model_not_found"
    reply = await mgw.request("POST", "/music/submit/music", json={"prompt": "x", "model": "videos-pro"},
                              key=mgw.key)
    assert reply.status == 400 and error_of(reply)["param"] == "model"


async def test_callbacks_follow_every_status(gateway_server: StartGateway,
                                             media_config: Callable[..., Config], receiver: Receiver) -> None:
    gw = await with_user(await gateway_server(media_config(tasks={"callback_allowlist": ["127.0.0.1"]})))
    task_id = await submit(gw, prompt="called back sim:dur500", notify_hook=receiver.url())
    await finished(gw, task_id)
    await until(lambda: _has(receiver, "SUCCESS"))
    statuses = [c["data"]["status"] for c in receiver.received]
    assert statuses[-1] == "SUCCESS" and len(statuses) == len(set(statuses)), statuses
    assert all(c["code"] == "success" and c["data"]["task_id"] == task_id for c in receiver.received)
    assert receiver.received[-1]["data"]["clips"][0]["id"] == f"{task_id}_1"


async def _has(receiver: Receiver, status: str) -> bool:
    return any(c["data"]["status"] == status for c in receiver.received)
