"""Video task A end to end through HTTP: submit (``{taskId, credits}``), the status object of spec
2.3 on every path with its money (reserved at once, charged the actual seconds, refunded on
failure), ownership, and the mp4 download with and without an upstream redirect."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import aiohttp
import pytest

from tests.conftest import GatewayHandle, StartGateway
from tests.families.media_helpers import (
    VIDEOA_PRICE_NANO,
    error_of,
    ledger_kinds,
    media_config,
    mgw,
    poll,
)
from tests.tasks.helpers import balance_nano, wait_stored, with_user

__all__ = ["media_config", "mgw"]  # fixtures

SUBMIT = "/videoa/v1/videos/generations"


async def submit(gw: GatewayHandle, prompt: str, model: str = "videoa-2-5", key: str | None = None,
                 **fields: Any) -> Any:
    reply = await gw.request("POST", SUBMIT, json={"model": model, "input": {"prompt": prompt, **fields}},
                             key=key or gw.key)
    assert reply.status == 200, reply.text
    return reply.json()


async def finished(gw: GatewayHandle, task_id: str, key: str | None = None) -> Any:
    return await poll(gw, f"/videoa/v1/tasks/{task_id}", lambda t: t["status"] in ("completed", "failed"),
                      key=key)


async def test_completed_task_is_charged_and_downloadable(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    answer = await submit(mgw, "a red kite over hills", duration=4)
    assert set(answer) == {"taskId", "credits"} and answer["credits"] == pytest.approx(0.2)
    task_id = answer["taskId"]
    # Held at submit, visible at once.
    assert (await balance_nano(mgw))[0] == before[0] - 4 * VIDEOA_PRICE_NANO
    first = (await mgw.request("GET", f"/videoa/v1/tasks/{task_id}", key=mgw.key)).json()
    assert first["billing_status"] == "reserved" and first["status"] in ("queued", "generating")
    assert "data" not in first and "failed_reason" not in first
    task = await finished(mgw, task_id)
    assert task["status"] == "completed" and task["billing_status"] == "charged", task
    assert task["id"] == task_id and task["model"] == "videoa-2-5"
    assert isinstance(task["created_at"], int) and task["credits"] == pytest.approx(0.2)
    assert "failed_reason" not in task
    assert task["data"]["processing_time"] > 0
    [url] = task["data"]["results"]
    assert url == f"{mgw.base_url}/videoa/v1/videos/generations/{task_id}.mp4"
    stored = await wait_stored(mgw, task_id, lambda t: t.billing_status == "charged")
    assert stored.upstream_task_id not in str(task)
    assert await balance_nano(mgw) == (before[0] - 4 * VIDEOA_PRICE_NANO, before[1] + 4 * VIDEOA_PRICE_NANO)
    assert await ledger_kinds(mgw, stored.request_id) == ["reserve", "settle"]
    assert await mgw.gateway.storage.audit() == []
    # The download: the upstream's bytes, with the caller's key.
    async with mgw.http.get(url, headers={"Authorization": f"Bearer {mgw.key}"}) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "video/mp4"
        assert resp.headers["X-Service-Request-Id"]
        body = await resp.read()
    assert body[4:8] == b"ftyp" and int(resp.headers["Content-Length"]) == len(body) > 256 * 1024
    assert hashlib.sha256(stored.upstream_task_id.encode()).digest() in body


async def test_actual_seconds_are_charged(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    answer = await submit(mgw, "shorter than asked sim:made3", duration=6)
    assert answer["credits"] == pytest.approx(0.3)
    task = await finished(mgw, answer["taskId"])
    assert task["billing_status"] == "charged" and task["credits"] == pytest.approx(0.15)
    await wait_stored(mgw, answer["taskId"], lambda t: t.billing_status == "charged")
    assert await balance_nano(mgw) == (before[0] - 3 * VIDEOA_PRICE_NANO, before[1] + 3 * VIDEOA_PRICE_NANO)


async def test_failed_task_is_refunded(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    answer = await submit(mgw, "doomed sim:taskfail")
    assert (await balance_nano(mgw))[0] == before[0] - 5 * VIDEOA_PRICE_NANO
    task = await finished(mgw, answer["taskId"])
    assert task["status"] == "failed" and task["billing_status"] == "refunded", task
    assert "simulated failure" in task["failed_reason"] and "data" not in task and task["credits"] == 0
    stored = await wait_stored(mgw, answer["taskId"], lambda t: t.billing_status == "refunded")
    assert await balance_nano(mgw) == before  # balance and used total both restored
    assert await ledger_kinds(mgw, stored.request_id) == ["reserve", "release"]
    reply = await mgw.request("GET", f"{SUBMIT}/{answer['taskId']}.mp4", key=mgw.key)
    assert reply.status == 404 and error_of(reply)["code"] == "video_not_ready"
    assert await mgw.gateway.storage.audit() == []


async def test_forgotten_task_is_refunded(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    task = await finished(mgw, (await submit(mgw, "lost sim:forget"))["taskId"])
    assert task["status"] == "failed" and task["billing_status"] == "refunded"
    assert "no longer knows" in task["failed_reason"]
    await wait_stored(mgw, task["id"], lambda t: t.billing_status == "refunded")
    assert await balance_nano(mgw) == before


async def test_rejected_submission_costs_nothing(mgw: GatewayHandle) -> None:
    before = await balance_nano(mgw)
    body = {"model": "videoa-2-0", "input": {"prompt": "x sim:reject"}}
    reply = await mgw.request("POST", SUBMIT, json=body, key=mgw.key)
    assert reply.status == 400 and "content filter" in error_of(reply)["message"]
    assert await balance_nano(mgw) == before
    assert await mgw.gateway.storage.audit() == []


async def test_download_follows_an_upstream_redirect(gateway_server: StartGateway, media_config: Any,
                                                     simulator: Any) -> None:
    gw = await with_user(await gateway_server(media_config(key="sk-sim-dur200-redirect-kb1024")))
    task = await finished(gw, (await submit(gw, "behind a signed link"))["taskId"])
    assert task["status"] == "completed"
    [url] = task["data"]["results"]
    received = 0
    async with gw.http.get(url, headers={"Authorization": f"Bearer {gw.key}"}) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "video/mp4"
        async for chunk in resp.content.iter_chunked(65536):
            received += len(chunk)
    assert received == int(resp.headers["Content-Length"]) > 1024 * 1024
    # The simulator saw the credentialed request redirected to its signed file link.
    async with gw.http.get(simulator.base_url + "/_sim/requests") as log_resp:
        log = await log_resp.json()
    paths = [e["path"] for e in log if str(e["path"]).startswith("/videoa/")]
    assert any(p.endswith(".mp4") and p.startswith("/videoa/v1/videos/generations/") for p in paths)


async def test_tasks_are_their_owners_alone(mgw: GatewayHandle) -> None:
    task_id = (await submit(mgw, "mine"))["taskId"]
    await finished(mgw, task_id)
    other_user = await mgw.create_user(quota_usd=5)
    other = (await mgw.create_key(other_user["id"]))["key"]
    for path in (f"/videoa/v1/tasks/{task_id}", f"{SUBMIT}/{task_id}.mp4", "/videoa/v1/tasks/nope"):
        reply = await mgw.request("GET", path, key=other)
        assert reply.status == 404, reply.text
        assert error_of(reply)["type"] == "not_found_error"
    for path in (f"/videoa/v1/tasks/{task_id}", f"{SUBMIT}/{task_id}.mp4"):
        reply = await mgw.request("GET", path)
        assert reply.status == 401 and error_of(reply)["code"] == "invalid_api_key"


async def test_statuses_advance_queued_generating_completed(mgw: GatewayHandle) -> None:
    task_id = (await submit(mgw, "slow pan sim:dur2500"))["taskId"]
    seen: list[str] = []
    while not seen or seen[-1] not in ("completed", "failed"):
        task = (await mgw.request("GET", f"/videoa/v1/tasks/{task_id}", key=mgw.key)).json()
        if not seen or seen[-1] != task["status"]:
            seen.append(task["status"])
        if task["status"] != "completed":
            assert task["billing_status"] == "reserved" and "data" not in task
    assert seen == ["queued", "generating", "completed"], seen


async def test_timeout_fails_and_refunds(gateway_server: StartGateway, media_config: Any) -> None:
    gw = await with_user(await gateway_server(media_config(tasks={"timeout_s": 0.4})))
    before = await balance_nano(gw)
    task = await finished(gw, (await submit(gw, "never ends sim:dur60000"))["taskId"])
    assert task["status"] == "failed" and task["billing_status"] == "refunded"
    assert "timed out" in task["failed_reason"]
    await wait_stored(gw, task["id"], lambda t: t.billing_status == "refunded")
    assert await balance_nano(gw) == before


async def test_price_beyond_the_balance_is_refused(gateway_server: StartGateway, media_config: Any) -> None:
    gw = await with_user(await gateway_server(media_config()), quota_usd=1)
    body = {"model": "videoa-2-5", "input": {"prompt": "too long for my wallet", "duration": 30}}
    reply = await gw.request("POST", SUBMIT, json=body, key=gw.key)  # 30 s x $0.05 = $1.50 > $1
    assert reply.status == 403 and error_of(reply)["code"] == "insufficient_quota"
    assert await balance_nano(gw) == (1_000_000_000, 0)
    answer = await submit(gw, "fits", duration=20)  # $1.00: exactly the balance
    assert answer["credits"] == pytest.approx(1.0) and (await balance_nano(gw))[0] == 0
    task = await finished(gw, answer["taskId"])
    assert task["billing_status"] == "charged"


async def test_group_ratio_applies(gateway_server: StartGateway, media_config: Any) -> None:
    gw = await gateway_server(media_config(groups={"default": {"ratio": 1.0}, "vip": {"ratio": 0.5}}))
    gw.user = await gw.create_user("vip-user", quota_usd=10, group="vip")
    gw.key_record = await gw.create_key(gw.user["id"])
    answer = await submit(gw, "half price", duration=4)
    assert answer["credits"] == pytest.approx(0.1)
    task = await finished(gw, answer["taskId"])
    assert task["credits"] == pytest.approx(0.1)
    await wait_stored(gw, answer["taskId"], lambda t: t.billing_status == "charged")
    assert await balance_nano(gw) == (10_000_000_000 - 2 * VIDEOA_PRICE_NANO, 2 * VIDEOA_PRICE_NANO)


async def test_client_hanging_up_mid_download(gateway_server: StartGateway, media_config: Any) -> None:
    gw = await with_user(await gateway_server(media_config(key="sk-sim-dur200-kb8192")))
    task = await finished(gw, (await submit(gw, "a big file"))["taskId"])
    [url] = task["data"]["results"]
    async with gw.http.get(url, headers={"Authorization": f"Bearer {gw.key}"}) as resp:
        assert resp.status == 200 and int(resp.headers["Content-Length"]) > 8 * 1024 * 1024
        await resp.content.readexactly(65536)
        resp.close()  # gone after the first chunk
    # The gateway is fine and serves the whole file to the next caller.
    async with gw.http.get(url, headers={"Authorization": f"Bearer {gw.key}"}) as resp:
        assert len(await resp.read()) == int(resp.headers["Content-Length"])


async def test_download_is_relayed_as_it_arrives(gateway_server: StartGateway, media_config: Any) -> None:
    # 8 pieces of 64 KB, 150 ms apart upstream: the first must reach the client long before the
    # last has left the upstream (the gateway holds no whole file).
    gw = await with_user(await gateway_server(media_config(key="sk-sim-dur200-kb512-pace150")))
    task = await finished(gw, (await submit(gw, "slow storage"))["taskId"])
    loop = asyncio.get_running_loop()
    start = loop.time()
    auth = {"Authorization": f"Bearer {gw.key}"}
    async with gw.http.get(task["data"]["results"][0], headers=auth) as resp:
        await resp.content.readexactly(1024)
        first = loop.time() - start
        rest = await resp.read()
        total = loop.time() - start
    assert total >= 1.0 and first < total / 2, (first, total)
    assert 1024 + len(rest) == int(resp.headers["Content-Length"])


async def test_upstream_cut_mid_download_is_a_truncated_transfer(gateway_server: StartGateway,
                                                                 media_config: Any) -> None:
    gw = await with_user(await gateway_server(media_config(key="sk-sim-dur200-kb1024-cutdl")))
    task = await finished(gw, (await submit(gw, "fragile link"))["taskId"])
    auth = {"Authorization": f"Bearer {gw.key}"}
    with pytest.raises(aiohttp.ClientPayloadError):
        async with gw.http.get(task["data"]["results"][0], headers=auth) as resp:
            assert resp.status == 200
            await resp.read()
    # Nothing about the task or its money changed.
    assert (await gw.request("GET", f"/videoa/v1/tasks/{task['id']}", key=gw.key)).json() == task
