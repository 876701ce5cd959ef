"""Video task B's list and content download (CONTRACT 6d) with the official openai SDK:
``videos.list()`` pages the caller's videos newest first (auto-paging by ``after``),
``videos.download_content()`` streams the simulator's bytes exactly (``variant=thumbnail`` too),
and nobody else's videos are listed or served. Runs on SQLite and PostgreSQL (the list's keyset
query)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
import orjson
import pytest
import pytest_asyncio

from gateway.settings.config import Config
from tests.conftest import GatewayHandle, StartGateway
from tests.families.media_helpers import poll
from tests.tasks.helpers import with_user

pytestmark = pytest.mark.filterwarnings("ignore:The Sora API:DeprecationWarning")


@pytest_asyncio.fixture
async def vgw(gateway_server: StartGateway, media_config: Callable[..., Config],
              database_url: str) -> GatewayHandle:
    return await with_user(await gateway_server(media_config(database=database_url)))


@pytest_asyncio.fixture
async def client(vgw: GatewayHandle) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(base_url=vgw.base_url + "/v1", api_key=vgw.key, max_retries=0)
    yield sdk
    await sdk.close()


async def finished(gw: GatewayHandle, video_id: str, key: str | None = None) -> Any:
    return await poll(gw, f"/v1/videos/{video_id}", lambda v: v["status"] in ("completed", "failed"),
                      key=key)


async def another_key(gw: GatewayHandle) -> str:
    """The API key of another user, with money of their own."""
    user = await gw.create_user(quota_usd=10)
    key: str = (await gw.create_key(user["id"], name="other"))["key"]
    return key


async def upstream_links(gw: GatewayHandle, video_id: str) -> dict[str, str]:
    """The upstream's own links of a video, as the task keeps them (never shown to clients)."""
    task = await gw.gateway.storage.get_task(video_id)
    assert task is not None and task.result_json
    result: dict[str, str] = orjson.loads(task.result_json)
    return result


async def upstream_bytes(gw: GatewayHandle, url: str) -> bytes:
    async with gw.http.get(url) as resp:
        assert resp.status == 200
        return await resp.read()


async def test_list_pages_the_callers_videos_newest_first(vgw: GatewayHandle,
                                                          client: openai.AsyncOpenAI) -> None:
    made = []
    for n in range(5):
        made.append((await client.videos.create(model="videos-standard", prompt=f"clip {n} sim:dur200")).id)
        await asyncio.sleep(0.01)  # distinct creation times
    theirs = await vgw.request("POST", "/v1/videos", json={"model": "videos-standard", "prompt": "not yours"},
                               key=await another_key(vgw))
    assert theirs.status == 200, theirs.text

    first = await client.videos.list(limit=2)
    assert [v.id for v in first.data] == made[::-1][:2] and first.has_more is True
    seen = [v.id async for v in await client.videos.list(limit=2)]  # the SDK follows ``after``
    assert seen == made[::-1]
    oldest = await client.videos.list(limit=3, order="asc")
    assert [v.id for v in oldest.data] == made[:3]
    everything = await client.videos.list()
    assert [v.id for v in everything.data] == made[::-1] and everything.has_more is False
    raw = (await vgw.request("GET", "/v1/videos?limit=2", key=vgw.key)).json()
    assert raw["object"] == "list" and raw["first_id"] == made[-1] and raw["last_id"] == made[-2]

    with pytest.raises(openai.BadRequestError) as refused:  # another user's video as a cursor
        await client.videos.list(after=theirs.json()["id"])
    assert refused.value.body["param"] == "after"  # type: ignore[index]
    for query, field in (("limit=0", "limit"), ("limit=101", "limit"), ("order=up", "order")):
        reply = await vgw.request("GET", f"/v1/videos?{query}", key=vgw.key)
        assert reply.status == 400 and reply.json()["error"]["param"] == field, reply.text


async def test_download_content_streams_the_upstream_bytes(vgw: GatewayHandle,
                                                           client: openai.AsyncOpenAI) -> None:
    video = await client.videos.create(model="videos-standard", prompt="a river sim:dur200 sim:kb300")
    with pytest.raises(openai.NotFoundError):  # not finished yet
        await client.videos.download_content(video.id)
    await finished(vgw, video.id)
    links = await upstream_links(vgw, video.id)

    content = await client.videos.download_content(video.id)
    assert content.response.headers["content-type"] == "video/mp4"
    assert len(content.content) == 300 * 1024
    assert content.content == await upstream_bytes(vgw, links["video_url"])
    thumbnail = await client.videos.download_content(video.id, variant="thumbnail")
    assert thumbnail.content == await upstream_bytes(vgw, links["thumbnail_url"])
    assert thumbnail.response.headers["content-type"] == "image/jpeg"
    with pytest.raises(openai.NotFoundError):  # the spec's upstream makes no spritesheet
        await client.videos.download_content(video.id, variant="spritesheet")
    with pytest.raises(openai.BadRequestError):
        await client.videos.download_content(video.id, variant="poster")  # type: ignore[arg-type]

    # A range (a browser's player seeking) is passed through: 206 and exactly those bytes.
    whole = content.content
    reply = await vgw.request("GET", f"/v1/videos/{video.id}/content", key=vgw.key,
                              headers={"Range": "bytes=1000-1999"})
    assert reply.status == 206 and reply.body == whole[1000:2000], reply.status
    assert reply.headers["Content-Range"] == f"bytes 1000-1999/{len(whole)}"
    assert reply.headers["Accept-Ranges"] == "bytes"


async def test_nobody_else_lists_or_downloads_a_video(vgw: GatewayHandle, client: openai.AsyncOpenAI) -> None:
    video = await client.videos.create(model="videos-standard", prompt="private sim:dur100")
    await finished(vgw, video.id)
    other = await another_key(vgw)
    theirs = openai.AsyncOpenAI(base_url=vgw.base_url + "/v1", api_key=other, max_retries=0)
    try:
        with pytest.raises(openai.NotFoundError):
            await theirs.videos.download_content(video.id)
        with pytest.raises(openai.NotFoundError):
            await theirs.videos.retrieve(video.id)
        assert (await theirs.videos.list()).data == []
    finally:
        await theirs.close()
    unsigned = f"/v1/media/{video.id}/video.mp4"
    assert (await vgw.request("GET", unsigned, key=other)).status == 404
    assert (await vgw.request("GET", unsigned)).status == 401
    owner = await vgw.request("GET", unsigned, key=vgw.key)  # no signature: the owner's key
    assert owner.status == 200 and owner.body == (await client.videos.download_content(video.id)).content


async def test_an_upstream_without_links_is_served_from_its_content(
        vgw: GatewayHandle, client: openai.AsyncOpenAI, simulator: Any) -> None:
    """An upstream that gives no links (the OpenAI API: its files are at ``/content``, with its
    credential): the video object still has the gateway's links, and both downloads work."""
    video = await client.videos.create(model="videos-standard",
                                       prompt="no links sim:dur100 sim:nolinks sim:kb96")
    done = await finished(vgw, video.id)
    assert done["status"] == "completed" and done["video_url"].startswith(vgw.base_url + "/v1/media/")
    task = await vgw.gateway.storage.get_task(video.id)
    assert task is not None
    direct = f"{simulator.base_url}/v1/videos/{task.upstream_task_id}/content"
    credential = {"Authorization": "Bearer sk-sim"}
    async with vgw.http.get(direct, headers=credential) as resp:
        upstream = await resp.read()
    async with vgw.http.get(direct + "?variant=thumbnail", headers=credential) as resp:
        upstream_thumbnail = await resp.read()
    assert len(upstream) == 96 * 1024
    assert (await client.videos.download_content(video.id)).content == upstream
    assert (await upstream_bytes(vgw, done["video_url"])) == upstream
    assert (await upstream_bytes(vgw, done["thumbnail_url"])) == upstream_thumbnail
