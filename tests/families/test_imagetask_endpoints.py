"""Image tasks end to end through HTTP: every endpoint of spec 4.9, the task object of spec 2.2,
follow-ups, validation (400 naming the field, nothing reaching the upstream) and ownership."""

from __future__ import annotations

import base64
from typing import Any

import aiohttp

from tests.conftest import GatewayHandle, StartGateway
from tests.tasks.helpers import (
    PRICE_NANO,
    balance_nano,
    fetch,
    submit,
    task_config,
    tgw,
    wait_task,
    with_user,
)

__all__ = ["task_config", "tgw"]  # fixtures

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n fake image bytes").decode()


async def sim_requests(gw: GatewayHandle, path_prefix: str) -> list[dict[str, Any]]:
    """What the simulator received on paths starting with ``path_prefix`` (its request log)."""
    sim_url = gw.gateway.config.upstreams[-1].base_url
    async with aiohttp.ClientSession() as s, s.get(sim_url + "/_sim/requests") as resp:
        log = await resp.json()
    return [e for e in log if str(e["path"]).startswith(path_prefix)]


async def finished(gw: GatewayHandle, kind: str, body: dict[str, Any],
                   key: str | None = None) -> dict[str, Any]:
    reply = await submit(gw, kind, body, key)
    assert reply.status == 200, reply.text
    return await wait_task(gw, reply.json()["result"], key=key)


async def test_imagine_task_object(tgw: GatewayHandle) -> None:
    reply = await submit(tgw, "imagine", {"prompt": "a lighthouse at dusk", "state": "s-1"})
    assert reply.status == 200, reply.text
    answer = reply.json()
    assert answer == {"code": 1, "description": "Submit success", "result": answer["result"],
                      "properties": {}}
    task_id = answer["result"]
    task = await wait_task(tgw, task_id)
    assert task["id"] == task_id and task["action"] == "IMAGINE" and task["status"] == "SUCCESS"
    assert task["progress"] == "100%" and task["prompt"] == "a lighthouse at dusk"
    assert task["promptEn"] and task["description"] and task["failReason"] is None
    assert task["imageUrl"].startswith("http")
    assert isinstance(task["submitTime"], int) and task["submitTime"] > 1_600_000_000_000
    assert task["submitTime"] <= task["startTime"] <= task["finishTime"]
    assert set(task["properties"]) == {"finalPrompt", "messageId", "channelId"}
    labels = [b["label"] for b in task["buttons"]]
    assert labels[:4] == ["U1", "U2", "U3", "U4"] and labels[5:] == ["V1", "V2", "V3", "V4"]
    assert all(set(b) == {"customId", "emoji", "label", "style", "type"} for b in task["buttons"])
    # The upstream's id stays inside the gateway.
    stored = await tgw.gateway.storage.get_task(task_id)
    assert stored is not None and stored.upstream_task_id and stored.upstream_task_id != task_id
    assert stored.upstream_task_id not in reply.text
    assert stored.upstream_task_id not in (await fetch(tgw, task_id)).text


async def test_progress_is_reported_while_running(tgw: GatewayHandle) -> None:
    reply = await submit(tgw, "imagine", {"prompt": "slow one sim:dur1500 sim:steps4"})
    task_id = reply.json()["result"]
    running = await wait_task(tgw, task_id, ("IN_PROGRESS",))
    assert running["buttons"] == [] and running["finishTime"] is None and running["startTime"]
    seen = {running["progress"]}
    done = running
    while done["status"] == "IN_PROGRESS":
        done = (await fetch(tgw, task_id)).json()
        seen.add(done["progress"])
    assert done["status"] == "SUCCESS"
    assert len(seen - {"100%"}) >= 2, seen  # progress moved in steps


async def test_blend_and_describe(tgw: GatewayHandle) -> None:
    blended = await finished(tgw, "blend", {"base64Array": [PNG, PNG], "dimensions": "portrait"})
    assert blended["action"] == "BLEND" and blended["status"] == "SUCCESS" and len(blended["buttons"]) == 9
    described = await finished(tgw, "describe", {"base64": PNG})
    assert described["action"] == "DESCRIBE" and described["status"] == "SUCCESS"
    assert described["buttons"] == []
    # A describe asks no prompt: its prompt is what the upstream found in the image.
    assert described["prompt"].startswith("1\ufe0f\u20e3") and described["prompt"] == described["promptEn"]


BAD_BODIES: list[tuple[str, dict[str, Any], str]] = [
    ("imagine", {"prompt": "  "}, "prompt"),
    ("imagine", {}, "prompt"),
    ("imagine", {"prompt": 5}, "prompt"),
    ("imagine", {"prompt": "x", "base64Array": ["http://example.com/a.png"]}, "base64Array[0]"),
    ("imagine", {"prompt": "x", "botType": "OTHER"}, "botType"),
    ("imagine", {"prompt": "x", "notifyHook": 7}, "notifyHook"),
    ("blend", {"base64Array": [PNG]}, "base64Array"),
    ("blend", {"base64Array": [PNG, "data:image/png;base64,@@@"]}, "base64Array[1]"),
    ("blend", {"base64Array": [PNG, PNG], "dimensions": "WIDE"}, "dimensions"),
    ("describe", {}, "base64"),
    ("describe", {"base64": "not a data url"}, "base64"),
    ("change", {"action": "UPSCALE", "index": 1}, "taskId"),
    ("zoom", {"taskId": "1", "zoom": 3}, "zoom"),
    ("pan", {"taskId": "1", "direction": "SIDEWAYS"}, "direction"),
    ("modal", {"taskId": "1", "maskBase64": "nope"}, "maskBase64"),
]


async def test_bad_bodies_are_400_naming_the_field(tgw: GatewayHandle) -> None:
    before = await balance_nano(tgw)
    for kind, body, param in BAD_BODIES:
        reply = await submit(tgw, kind, body)
        assert reply.status == 400, (kind, body, reply.text)
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == param, (kind, body, error)
    assert await balance_nano(tgw) == before
    assert await tgw.gateway.storage.due_tasks(1e12, 10) == []  # nothing was accepted


async def test_change_upscale_variation_reroll(tgw: GatewayHandle) -> None:
    grid = await finished(tgw, "imagine", {"prompt": "three pears"})
    parent = await tgw.gateway.storage.get_task(grid["id"])
    assert parent is not None
    up = await finished(tgw, "change", {"taskId": grid["id"], "action": "UPSCALE", "index": 2})
    assert up["action"] == "UPSCALE" and up["id"] != grid["id"] and up["prompt"] == "three pears"
    assert [b["label"] for b in up["buttons"]][:2] == ["Zoom Out 2x", "Zoom Out 1.5x"]
    var = await finished(tgw, "change", {"taskId": grid["id"], "action": "variation", "index": 4})
    assert var["action"] == "VARIATION" and len(var["buttons"]) == 9
    reroll = await finished(tgw, "change", {"taskId": grid["id"], "action": "REROLL"})
    assert reroll["action"] == "REROLL"
    # Upstream, follow-ups name the upstream's own id, and never carry the client's hook or state.
    bodies = [c["body_json_or_null"] for c in await sim_requests(tgw, "/imagetask/submit/change")][-3:]
    assert [(b["taskId"], b["action"]) for b in bodies] == [
        (parent.upstream_task_id, "UPSCALE"), (parent.upstream_task_id, "VARIATION"),
        (parent.upstream_task_id, "REROLL")]


CHANGE_RULES: list[tuple[dict[str, Any], str]] = [
    ({"action": "UPSCALE"}, "index"),
    ({"action": "UPSCALE", "index": 0}, "index"),
    ({"action": "VARIATION", "index": 5}, "index"),
    ({"action": "UPSCALE", "index": "1"}, "index"),
    ({"action": "ZOOM", "index": 1}, "action"),
    ({}, "action"),
    ({"customId": "imagetask::upsample::9::x"}, "customId"),
    ({"customId": "garbage"}, "customId"),
]


async def test_change_rules(tgw: GatewayHandle) -> None:
    grid = await finished(tgw, "imagine", {"prompt": "rules"})
    for body, param in CHANGE_RULES:
        reply = await submit(tgw, "change", {"taskId": grid["id"], **body})
        assert reply.status == 400, (body, reply.text)
        assert reply.json()["error"]["param"] == param, (body, reply.text)


async def test_buttons_drive_follow_ups(tgw: GatewayHandle) -> None:
    grid = await finished(tgw, "imagine", {"prompt": "buttons"})
    u3 = next(b for b in grid["buttons"] if b["label"] == "U3")
    up = await finished(tgw, "change", {"taskId": grid["id"], "customId": u3["customId"]})
    assert up["action"] == "UPSCALE"
    stored = await tgw.gateway.storage.get_task(up["id"])
    assert stored is not None and '"index":3' in stored.request_json
    zoom_button = next(b for b in up["buttons"] if b["label"] == "Zoom Out 2x")
    zoomed = await finished(tgw, "change", {"taskId": up["id"], "customId": zoom_button["customId"]})
    assert zoomed["action"] == "ZOOM" and len(zoomed["buttons"]) == 9
    # A button of one task used on another is refused.
    other = await submit(tgw, "change", {"taskId": grid["id"], "customId": zoom_button["customId"]})
    assert other.status == 400 and other.json()["error"]["param"] == "customId"


async def test_zoom_pan_modal_on_an_upscaled_image(tgw: GatewayHandle) -> None:
    grid = await finished(tgw, "imagine", {"prompt": "a valley"})
    up = await finished(tgw, "change", {"taskId": grid["id"], "action": "UPSCALE", "index": 1})
    zoomed = await finished(tgw, "zoom", {"taskId": up["id"], "zoom": 1.5})
    panned = await finished(tgw, "pan", {"taskId": up["id"], "direction": "left", "prompt": "more sky"})
    region = await finished(tgw, "modal", {"taskId": up["id"], "prompt": "a red door", "maskBase64": PNG})
    assert (zoomed["action"], panned["action"], region["action"]) == ("ZOOM", "PAN", "MODAL")
    assert panned["prompt"] == "more sky"
    # Whether an action fits the task is the upstream's call: a grid's zoom, pan and modal are relayed
    # (the simulator allows them) ...
    for kind, body in (("zoom", {"zoom": 2}), ("pan", {"direction": "UP"}),
                       ("modal", {"prompt": "a door", "maskBase64": PNG})):
        done = await finished(tgw, kind, {"taskId": grid["id"], **body})
        assert done["action"] == kind.upper() and done["status"] == "SUCCESS", done
    # ... and when the upstream says no, its refusal reaches the client in the family's envelope.
    reply = await submit(tgw, "zoom", {"taskId": grid["id"], "prompt": "wider sim:reject"})
    assert reply.status == 400 and "banned prompt" in reply.json()["error"]["message"], reply.text


async def test_follow_up_needs_a_finished_successful_task(tgw: GatewayHandle) -> None:
    running = (await submit(tgw, "imagine", {"prompt": "still going sim:dur3000"})).json()["result"]
    reply = await submit(tgw, "change", {"taskId": running, "action": "UPSCALE", "index": 1})
    assert reply.status == 400 and reply.json()["error"]["param"] == "taskId", reply.text
    failed = await finished(tgw, "imagine", {"prompt": "doomed sim:taskfail"})
    reply = await submit(tgw, "change", {"taskId": failed["id"], "action": "UPSCALE", "index": 1})
    assert reply.status == 400 and "failed" in reply.json()["error"]["message"]
    reply = await submit(tgw, "change", {"taskId": "12345", "action": "UPSCALE", "index": 1})
    assert reply.status == 404 and reply.json()["error"]["code"] == "task_not_found"


async def test_ownership(gateway_server: StartGateway, tgw: GatewayHandle) -> None:
    mine = await finished(tgw, "imagine", {"prompt": "mine"})
    other_user = await tgw.create_user("someone-else", quota_usd=5)
    other_key = (await tgw.create_key(other_user["id"], name="other"))["key"]
    # Another user's task: 404 on fetch and on every follow-up, left out of list-by-condition.
    assert (await fetch(tgw, mine["id"], other_key)).status == 404
    for kind, body in (("change", {"taskId": mine["id"], "action": "UPSCALE", "index": 1}),
                       ("change", {"taskId": mine["id"], "customId": mine["buttons"][0]["customId"]}),
                       ("zoom", {"taskId": mine["id"]}), ("pan", {"taskId": mine["id"], "direction": "UP"}),
                       ("modal", {"taskId": mine["id"]})):
        reply = await submit(tgw, kind, body, other_key)
        assert reply.status == 404, (kind, reply.text)
    theirs = await finished(tgw, "imagine", {"prompt": "theirs"}, other_key)
    second = await finished(tgw, "imagine", {"prompt": "mine too"})
    listed = await tgw.request("POST", "/imagetask/task/list-by-condition", key=tgw.key,
                               json={"ids": [second["id"], theirs["id"], "nope", mine["id"], second["id"]]})
    assert listed.status == 200, listed.text
    assert [t["id"] for t in listed.json()] == [second["id"], mine["id"]]
    # A second key of the same user sees the user's tasks.
    same_user_key = (await tgw.create_key(tgw.user["id"], name="second"))["key"]
    assert (await fetch(tgw, mine["id"], same_user_key)).status == 200


async def test_list_by_condition_validation(tgw: GatewayHandle) -> None:
    reply = await tgw.request("POST", "/imagetask/task/list-by-condition", key=tgw.key, json={"ids": "x"})
    assert reply.status == 400 and reply.json()["error"]["param"] == "ids"
    reply = await tgw.request("POST", "/imagetask/task/list-by-condition", key=tgw.key,
                              json={"ids": [str(i) for i in range(501)]})
    assert reply.status == 400 and reply.json()["error"]["param"] == "ids"
    reply = await tgw.request("POST", "/imagetask/task/list-by-condition", key=tgw.key, json={"ids": []})
    assert reply.status == 200 and reply.json() == []


async def test_auth_and_model_permission(tgw: GatewayHandle) -> None:
    reply = await tgw.request("POST", "/imagetask/submit/imagine", json={"prompt": "x"})
    assert reply.status == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    assert "X-Service-Request-Id" in reply.headers
    reply = await fetch(tgw, "1", key="sk-wrong")
    assert reply.status == 401
    limited = (await tgw.create_key(tgw.user["id"], name="chat-only", models=["sim-chat"]))["key"]
    reply = await submit(tgw, "imagine", {"prompt": "x"}, limited)
    assert reply.status == 403 and reply.json()["error"]["code"] == "model_not_allowed"


async def test_insufficient_quota_leaves_no_task(gateway_server: StartGateway, task_config: Any) -> None:
    gw = await with_user(await gateway_server(task_config()), quota_usd=0.01)
    reply = await submit(gw, "imagine", {"prompt": "too dear"})
    assert reply.status == 403 and reply.json()["error"]["code"] == "insufficient_quota"
    assert await balance_nano(gw) == (10_000_000, 0)
    assert await gw.gateway.storage.due_tasks(1e12, 10) == []
    assert await gw.gateway.storage.audit() == []


async def test_success_is_charged_the_upstreams_per_task_price(tgw: GatewayHandle) -> None:
    before, _ = await balance_nano(tgw)
    task = await finished(tgw, "imagine", {"prompt": "priced"})
    after, used = await balance_nano(tgw)
    assert before - after == used == PRICE_NANO
    stored = await tgw.gateway.storage.get_task(task["id"])
    assert stored is not None and stored.billing_status == "charged" and stored.charged_nano == PRICE_NANO
    assert stored.model == "imagetask-mj"
    logs = await tgw.request("GET", "/api/log/self", headers={"Authorization": f"Bearer {tgw.user_token}"})
    assert logs.status == 200, logs.text
    items = logs.json()["data"]["items"]
    assert any(i["model_name"] == "imagetask-mj" and i["quota"] > 0 for i in items), items
