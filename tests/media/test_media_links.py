"""Result links of every media family point at the gateway (CONTRACT 6d), through raw HTTP: an
image's ``imageUrl``, a song's clip links, a video's ``video_url``. A signed link works without a
key (as a CDN link would: ``<img src>``, a callback receiver) until it expires; without a
signature only the owner's key does; a forged link says nothing. The bytes are the upstream's
exactly; ``media_links: upstream`` hands out the upstream's links instead; a result link off the
upstream's origin goes through the SSRF guard; a file over ``tasks.media_download_bytes`` is
refused before a byte is sent; with ``tasks.public_url`` a callback carries gateway links too."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from gateway.settings.config import Config
from gateway.tasks import engine_of
from tests import loopback
from tests.conftest import GatewayHandle, StartGateway
from tests.families.media_helpers import media_upstreams, poll
from tests.tasks.helpers import submit, until, wait_task, with_user

FINAL = ("completed", "failed")


async def stored_result(gw: GatewayHandle, task_id: str) -> Any:
    task = await gw.gateway.storage.get_task(task_id)
    assert task is not None and task.result_json
    return orjson.loads(task.result_json)


async def get(gw: GatewayHandle, url: str, key: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with gw.http.get(url, headers=headers) as resp:
        return resp.status, await resp.read(), dict(resp.headers)


async def another_key(gw: GatewayHandle) -> str:
    user = await gw.create_user(quota_usd=10)
    key: str = (await gw.create_key(user["id"], name="other"))["key"]
    return key


async def video(gw: GatewayHandle, prompt: str) -> Any:
    reply = await gw.request("POST", "/v1/videos", json={"model": "videos-standard", "prompt": prompt},
                             key=gw.key)
    assert reply.status == 200, reply.text
    return await poll(gw, f"/v1/videos/{reply.json()['id']}", lambda v: v["status"] in FINAL)


async def test_image_links_are_signed_gateway_links(tgw: GatewayHandle) -> None:
    reply = await submit(tgw, "imagine", {"prompt": "a lighthouse"})
    task = await wait_task(tgw, reply.json()["result"])
    link = task["imageUrl"]
    assert link.startswith(f"{tgw.base_url}/v1/media/{task['id']}/image.png?"), link
    upstream = (await stored_result(tgw, task["id"]))["imageUrl"]
    assert urlsplit(upstream).netloc != urlsplit(link).netloc  # the simulator's host stays inside

    status, body, headers = await get(tgw, link)  # no key: the link is the credential
    assert status == 200 and body.startswith(b"\x89PNG") and headers["Content-Type"] == "image/png"
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Content-Security-Policy"] == "sandbox"
    assert body == (await get(tgw, upstream))[1]
    listed = await tgw.request("POST", "/imagetask/task/list-by-condition", json={"ids": [task["id"]]},
                               key=tgw.key)
    assert listed.json()[0]["imageUrl"] == link  # the same link within the hour

    path, query = link.removeprefix(tgw.base_url).split("?")
    signature = parse_qs(query)["signature"][0]
    forged = link.replace(signature, "A" + signature[1:] if signature[0] != "A" else "B" + signature[1:])
    assert (await get(tgw, forged))[0] == 404
    assert (await get(tgw, link.replace("image.png", "other.png")))[0] == 404  # signed for one slot only
    assert (await get(tgw, tgw.base_url + path, key=await another_key(tgw)))[0] == 404
    assert (await get(tgw, tgw.base_url + path, key=tgw.key))[:2] == (200, body)

    engine = engine_of(tgw.gateway)
    past = int(time.time()) - 60
    expired = f"{tgw.base_url}{path}?expires={past}&signature={engine.media._sign(task['id'], 'image', past)}"
    status, body, _ = await get(tgw, expired)
    assert status == 403 and orjson.loads(body)["error"]["code"] == "media_link_expired", body


async def test_music_clip_links_are_gateway_links(mgw: GatewayHandle) -> None:
    reply = await mgw.request("POST", "/music/submit/music", json={"prompt": "a shanty", "model": "music_v4"},
                              key=mgw.key)
    task_id = reply.json()["data"]
    data = await poll(mgw, f"/music/fetch/{task_id}", lambda b: b["data"]["status"] in ("SUCCESS", "FAILURE"))
    first, second = data["data"]["clips"]
    upstream = (await stored_result(mgw, task_id))["clips"]
    for clip, kept, fields in ((first, upstream[0], ("audio_url", "video_url", "image_url")),
                               (second, upstream[1], ("audio_url",))):
        for field in fields:
            assert clip[field].startswith(f"{mgw.base_url}/v1/media/{task_id}/clip"), clip[field]
            status, body, _ = await get(mgw, clip[field])
            assert status == 200 and body == (await get(mgw, kept[field]))[1], field
    many = await mgw.request("POST", "/music/fetch", json={"ids": [task_id]}, key=mgw.key)
    assert many.json()["data"][0]["clips"][0]["audio_url"] == first["audio_url"]


async def test_media_links_upstream_keeps_the_upstreams_links(gateway_server: StartGateway,
                                                              media_config: Callable[..., Config],
                                                              simulator: Any) -> None:
    ups = [{**u, "media_links": "upstream"} for u in media_upstreams(simulator.base_url)]
    gw = await with_user(await gateway_server(media_config(upstreams=ups)))
    done = await video(gw, "as it was sim:dur100")
    assert done["video_url"].startswith(simulator.base_url + "/v1/videos/files/"), done["video_url"]
    assert done["video_url"] == (await stored_result(gw, done["id"]))["video_url"]
    content = await gw.request("GET", f"/v1/videos/{done['id']}/content", key=gw.key)
    assert content.status == 200 and content.body == (await get(gw, done["video_url"]))[1]
    bare = await video(gw, "no links of its own sim:dur100 sim:nolinks")  # its API's own URL, then
    task = await gw.gateway.storage.get_task(bare["id"])
    assert task is not None
    assert bare["video_url"] == f"{simulator.base_url}/v1/videos/{task.upstream_task_id}/content"


@pytest.mark.parametrize(("option", "host", "admitted"), [("offsite", "localhost", False),
                                                          ("offsiteip", "127.0.0.2", False),
                                                          ("offsite", "localhost", True)])
async def test_an_offsite_result_link_passes_the_ssrf_guard(
        gateway_server: StartGateway, media_config: Callable[..., Config], caplog: pytest.LogCaptureFixture,
        option: str, host: str, admitted: bool) -> None:
    """The upstream names another host for its files (``localhost``, or the IP literal
    ``127.0.0.2``): another origin, on a private address. Not admitted, the gateway refuses to go
    there (502, one warning naming the upstream); admitted by ``tasks.callback_allowlist``, the file
    is relayed."""
    caplog.set_level(logging.INFO)
    allow = [host] if admitted else []
    gw = await with_user(await gateway_server(media_config(tasks={"callback_allowlist": allow})))
    done = await video(gw, f"elsewhere sim:dur100 sim:{option}")
    upstream = (await stored_result(gw, done["id"]))["video_url"]
    assert upstream.startswith(f"http://{host}:"), upstream
    caplog.clear()
    status, body, _ = await get(gw, done["video_url"])
    if admitted:
        assert status == 200 and body == (await get(gw, upstream))[1]
        return
    assert status == 502, body
    assert "refused destination" in orjson.loads(body)["error"]["message"]
    warned = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING and "sim-videos" in r.getMessage()]
    assert len(warned) == 1 and "non-public address" in warned[0], warned


async def test_a_file_over_the_download_limit_is_refused(gateway_server: StartGateway,
                                                         media_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(media_config(tasks={"media_download_bytes": 100_000})))
    done = await video(gw, "too big sim:dur100 sim:kb200")
    reply = await gw.request("GET", f"/v1/videos/{done['id']}/content", key=gw.key)
    assert reply.status == 502 and reply.json()["error"]["code"] == "media_too_large", reply.text
    small = await video(gw, "fits sim:dur100 sim:kb64")
    assert (await gw.request("GET", f"/v1/videos/{small['id']}/content", key=gw.key)).status == 200


@pytest_asyncio.fixture
async def hooks() -> AsyncIterator[tuple[str, list[Any]]]:
    received: list[Any] = []

    async def hook(request: web.Request) -> web.StreamResponse:
        received.append(orjson.loads(await request.read()))
        return web.Response()

    app = web.Application()
    app.router.add_post("/hook", hook)
    async with loopback.serving(app, access_log=None) as base:
        yield base + "/hook", received


async def test_callbacks_carry_gateway_links_with_a_public_url(
        gateway_server: StartGateway, task_config: Callable[..., Config],
        hooks: tuple[str, list[Any]]) -> None:
    url, received = hooks
    public = "https://media.example.test"
    gw = await with_user(await gateway_server(task_config(
        tasks={"callback_allowlist": ["127.0.0.1"], "public_url": public + "/"})))
    reply = await submit(gw, "imagine", {"prompt": "called back", "notifyHook": url})
    task = await wait_task(gw, reply.json()["result"])
    assert task["imageUrl"].startswith(f"{public}/v1/media/{task['id']}/image.png?")  # answers too
    await until(lambda: _finished(received))
    final = received[-1]
    assert final["imageUrl"].startswith(f"{public}/v1/media/{task['id']}/image.png?"), final


async def _finished(received: list[Any]) -> bool:
    return any(c["status"] == "SUCCESS" for c in received)


async def test_head_and_the_video_a_file(mgw: GatewayHandle) -> None:
    """A HEAD of a link answers its headers only; a video-A task's file is served at
    ``/v1/media`` too (with the owner's key), the same bytes as its ``.mp4`` download."""
    done = await video(mgw, "heads only sim:dur100 sim:kb128")
    async with mgw.http.head(done["video_url"]) as resp:
        assert resp.status == 200 and resp.headers["Content-Length"] == str(128 * 1024)
        assert await resp.read() == b""
    body = {"model": "videoa-2-5", "input": {"prompt": "a video A"}}
    submitted = await mgw.request("POST", "/videoa/v1/videos/generations", json=body, key=mgw.key)
    task_id = submitted.json()["taskId"]
    task = await poll(mgw, f"/videoa/v1/tasks/{task_id}", lambda t: t["status"] in FINAL)
    [download] = task["data"]["results"]
    whole = (await get(mgw, download, key=mgw.key))[1]
    assert len(whole) > 1000
    file = f"{mgw.base_url}/v1/media/{task_id}/video.mp4"
    status, body_bytes, _ = await get(mgw, file, key=mgw.key)
    assert status == 200 and body_bytes == whole
    assert (await get(mgw, file, key=await another_key(mgw)))[0] == 404
