"""Video task B end to end: create and retrieve with the openai SDK (multipart, as it sends) and
with plain JSON (spec 4.11), the video object of spec 2.4 on every status path, billing per second
made (free on failure), validation (400 naming the field, nothing reaching the upstream) and
ownership."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
import pytest
import pytest_asyncio

from tests.conftest import GatewayHandle
from tests.families.media_helpers import VIDEOS_PRICE_NANO, error_of, ledger_kinds, media_config, mgw, poll
from tests.tasks.helpers import balance_nano, wait_stored

__all__ = ["media_config", "mgw"]  # fixtures
# The openai SDK marks its video methods deprecated (the vendor's own service is being retired);
# the wire API they speak is what this family serves.
pytestmark = pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n reference").decode()


@pytest_asyncio.fixture
async def client(mgw: GatewayHandle) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(base_url=mgw.base_url + "/v1", api_key=mgw.key, max_retries=0)
    yield sdk
    await sdk.close()


async def create(gw: GatewayHandle, **body: Any) -> Any:
    reply = await gw.request("POST", "/v1/videos", json={"model": "videos-standard", **body}, key=gw.key)
    assert reply.status == 200, reply.text
    return reply.json()


async def finished(gw: GatewayHandle, video_id: str) -> Any:
    return await poll(gw, f"/v1/videos/{video_id}", lambda v: v["status"] in ("completed", "failed"))


async def test_sdk_create_and_retrieve(mgw: GatewayHandle, client: openai.AsyncOpenAI) -> None:
    before = await balance_nano(mgw)
    video = await client.videos.create(model="videos-standard", prompt="a paper boat sim:dur1500",
                                       seconds="8", size="1280x720")
    assert video.id.startswith("video_") and video.object == "video.task"  # type: ignore[comparison-overlap]
    assert video.status == "queued" and video.model == "videos-standard" and video.created_at > 0
    assert (await balance_nano(mgw))[0] == before[0] - 8 * VIDEOS_PRICE_NANO  # held at once
    statuses = {video.status}
    while video.status not in ("completed", "failed"):
        video = await client.videos.retrieve(video.id)
        statuses.add(video.status)
    assert video.status == "completed" and "processing" in statuses, statuses
    raw = video.model_dump()
    # the gateway's own links (CONTRACT 6d: tests/media covers them)
    assert raw["video_url"].startswith(mgw.base_url + "/v1/media/") and ".mp4?" in raw["video_url"]
    assert ".jpg?" in raw["thumbnail_url"]
    assert raw["duration"] == 8 and raw["completed_at"] >= raw["created_at"] and video.progress == 100
    assert "failure_reason" in raw and raw["failure_reason"] is None
    stored = await wait_stored(mgw, video.id, lambda t: t.billing_status == "charged")
    assert await balance_nano(mgw) == (before[0] - 8 * VIDEOS_PRICE_NANO, before[1] + 8 * VIDEOS_PRICE_NANO)
    assert await ledger_kinds(mgw, stored.request_id) == ["reserve", "settle"]
    assert stored.upstream_task_id not in str(raw)
    async with aiohttp.ClientSession() as s, s.get(raw["video_url"]) as resp:
        assert resp.status == 200 and resp.content_type == "video/mp4"


async def test_sdk_reference_file_upload(mgw: GatewayHandle, client: openai.AsyncOpenAI,
                                         simulator: Any) -> None:
    frame = ("frame.png", b"\x89PNG\r\n\x1a\n pixels", "image/png")
    video = await client.videos.create(model="videos-standard", prompt="from this frame", seconds="4",
                                       input_reference=frame)
    assert video.status == "queued"
    async with aiohttp.ClientSession() as s, s.get(simulator.base_url + "/_sim/requests") as resp:
        log = await resp.json()
    sent = [e for e in log if e["path"] == "/v1/videos" and e["method"] == "POST"][-1]
    assert "data:image/png;base64," in str(sent)


async def test_charged_for_seconds_made(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    video = await create(mgw, prompt="cut short sim:made2", seconds=6, input_reference={"image_url": PNG})
    done = await finished(mgw, video["id"])
    assert done["status"] == "completed" and done["duration"] == 2 and done["seconds"] == "2"
    await wait_stored(mgw, video["id"], lambda t: t.billing_status == "charged")
    assert await balance_nano(mgw) == (before[0] - 2 * VIDEOS_PRICE_NANO, before[1] + 2 * VIDEOS_PRICE_NANO)


@pytest.mark.parametrize(("prompt", "reason"), [("melts sim:taskfail", "simulated failure"),
                                                ("vanishes sim:forget", "no longer knows")])
async def test_failures_cost_nothing(mgw: GatewayHandle, prompt: str, reason: str) -> None:
    before = await balance_nano(mgw)
    video = await create(mgw, prompt=prompt, seconds=5)
    done = await finished(mgw, video["id"])
    assert done["status"] == "failed" and reason in done["failure_reason"], done
    assert done["video_url"] is None and done["completed_at"] is None
    assert done["error"]["message"] == done["failure_reason"]
    stored = await wait_stored(mgw, video["id"], lambda t: t.billing_status == "refunded")
    assert await balance_nano(mgw) == before
    assert await ledger_kinds(mgw, stored.request_id) == ["reserve", "release"]
    assert await mgw.gateway.storage.audit() == []


async def test_refused_create_is_relayed_and_free(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    reply = await mgw.request("POST", "/v1/videos", json={"model": "videos-pro", "prompt": "no sim:reject"},
                              key=mgw.key)
    assert reply.status == 400 and "moderation" in error_of(reply)["message"]
    assert await balance_nano(mgw) == before


@pytest.mark.parametrize(("body", "field"), [
    ({"prompt": "x"}, "model"),
    ({"model": "videos-standard"}, "prompt"),
    ({"model": "videos-standard", "prompt": "  "}, "prompt"),
    ({"model": "videos-standard", "prompt": "x", "seconds": 0}, "seconds"),
    ({"model": "videos-standard", "prompt": "x", "seconds": 21}, "seconds"),
    ({"model": "videos-standard", "prompt": "x", "seconds": "four"}, "seconds"),
    ({"model": "videos-standard", "prompt": "x", "size": "big"}, "size"),
    ({"model": "videos-standard", "prompt": "x", "size": "10x720"}, "size"),
    ({"model": "videos-standard", "prompt": "x", "aspect_ratio": "4:3"}, "aspect_ratio"),
    ({"model": "videos-standard", "prompt": "x", "n": 2}, "n"),
    ({"model": "videos-standard", "prompt": "x", "input_reference": {}}, "input_reference"),
    ({"model": "videos-standard", "prompt": "x", "input_reference": {"image_url": "http://10.0.0.1/a.png"}},
     "input_reference.image_url"),
    ({"model": "videos-standard", "prompt": "x", "input_reference": {"video_url": PNG}},
     "input_reference.video_url"),
    ({"model": "videos-standard", "prompt": "x", "colour": "blue"}, "colour"),
])
async def test_bad_fields_are_400_naming_them(mgw: GatewayHandle, body: dict[str, Any], field: str) -> None:
    before = await balance_nano(mgw)
    reply = await mgw.request("POST", "/v1/videos", json=body, key=mgw.key)
    assert reply.status == 400, reply.text
    err = error_of(reply)
    assert err["type"] == "invalid_request_error" and err["param"] == field, err
    assert await balance_nano(mgw) == before


async def test_unknown_model_and_ownership(mgw: GatewayHandle) -> None:
    reply = await mgw.request("POST", "/v1/videos", json={"model": "nope", "prompt": "x"}, key=mgw.key)
    assert reply.status == 404 and error_of(reply)["code"] == "model_not_found"
    reply = await mgw.request("POST", "/v1/videos", json={"model": "sim-chat", "prompt": "x"}, key=mgw.key)
    assert reply.status == 400 and error_of(reply)["param"] == "model"
    video = await create(mgw, prompt="private")
    other_user = await mgw.create_user(quota_usd=5)
    other = (await mgw.create_key(other_user["id"]))["key"]
    for vid in (video["id"], "video_unknown"):
        reply = await mgw.request("GET", f"/v1/videos/{vid}", key=other)
        assert reply.status == 404 and error_of(reply)["code"] == "task_not_found"
    assert (await mgw.request("GET", f"/v1/videos/{video['id']}")).status == 401
