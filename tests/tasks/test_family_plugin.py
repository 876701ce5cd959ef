"""The engine names no family: a third-party task family (here a toy with its own statuses and
answer shape, riding on the image-task upstream) plugs in through ``gateway_task_families`` and
gets polling, batching, billing and ownership for free. Also: a fetch refreshes a stale task
first, and the poller batches its questions."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import aiohttp
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.edge.http import endpoint, get_gateway, json_response, read_json_body, request_id
from gateway.hooks.specs import hookimpl
from gateway.runtime.context import Gateway
from gateway.settings.config import Config, UpstreamConfig
from gateway.storage.rows import TaskRecord
from gateway.tasks import Candidate, NewTask, Snapshot, Submitted, engine_of
from gateway.tasks.family import Phase
from gateway.tasks.upstream import TaskHttp
from tests.conftest import GatewayHandle, StartGateway
from tests.tasks.helpers import PRICE_NANO, balance_nano, submit, wait_stored, with_user

_PHASES: dict[str, Phase] = {"SUBMITTED": "queued", "NOT_START": "queued", "IN_PROGRESS": "running",
                             "SUCCESS": "succeeded", "FAILURE": "failed"}
_MINE = {"queued": "pending", "running": "working", "succeeded": "done", "failed": "error"}


class ToyTasks:
    name = "toy"
    protocol = "imagetask"
    failure_status = "error"
    poll_batch = 2

    def __init__(self) -> None:
        self.batches: list[int] = []

    async def poll(self, http: TaskHttp, upstream: UpstreamConfig,
                   tasks: Sequence[TaskRecord]) -> Mapping[str, Snapshot]:
        self.batches.append(len(tasks))
        reply = await http.call(upstream, "POST", "/imagetask/task/list-by-condition",
                                orjson.dumps({"ids": [t.upstream_task_id for t in tasks]}))
        out: dict[str, Snapshot] = {}
        for item in orjson.loads(reply.body):
            phase = _PHASES[item["status"]]
            out[item["id"]] = Snapshot(status=_MINE[phase], phase=phase, progress=item["progress"],
                                       result_json=orjson.dumps({"url": item["imageUrl"]}).decode(),
                                       charge_nano=PRICE_NANO // 2 if phase == "succeeded" else None)
        return out

    def callback_payload(self, task: TaskRecord) -> bytes | None:
        return None


class ToyPlugin:
    def __init__(self) -> None:
        self.family = ToyTasks()

    @hookimpl
    def gateway_task_families(self) -> list[ToyTasks]:
        return [self.family]

    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        return [Route("/toy/tasks", create, methods=["POST"]),
                Route("/toy/tasks/{tid}", show, methods=["GET"])]


@endpoint("chat")
async def create(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "chat")
    prompt = orjson.loads(await read_json_body(request))["prompt"]
    engine = engine_of(gw)
    candidates = [Candidate(t, engine.first_model(t), PRICE_NANO)
                  for t in engine.upstream_targets("imagetask")]

    async def send(c: Candidate) -> Submitted:
        reply = await engine.http.call(c.target.upstream, "POST", "/imagetask/submit/imagine",
                                       orjson.dumps({"prompt": prompt}))
        return Submitted(str(orjson.loads(reply.body)["result"]), Snapshot(status="pending", phase="queued"))

    task = await engine.submit(principal, request_id(request),
                               NewTask(family="toy", action="draw", status="new", route="/toy/tasks"),
                               candidates, send)
    return json_response({"toy_id": task.task_id, "state": task.status}, status=201)


@endpoint("chat")
async def show(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "chat")
    task = await engine_of(gw).fetch(principal, "toy", request.path_params["tid"])
    return json_response({"toy_id": task.task_id, "state": task.status, "progress": task.progress,
                          "billing": task.billing_status, "charged": task.charged_nano})


async def test_a_plugin_family_rides_the_engine(gateway_server: StartGateway,
                                                task_config: Callable[..., Config]) -> None:
    plugin = ToyPlugin()
    gw = await with_user(await gateway_server(task_config(key="sk-sim-dur300"), extra_plugins=[plugin]))
    before, _ = await balance_nano(gw)
    replies = await asyncio.gather(*(gw.request("POST", "/toy/tasks", json={"prompt": f"t{i}"}, key=gw.key)
                                     for i in range(5)))
    assert all(r.status == 201 for r in replies), [r.text for r in replies]
    ids = [r.json()["toy_id"] for r in replies]
    for tid in ids:
        await wait_stored(gw, tid, lambda t: t.finished_at is not None)
    shown = [(await gw.request("GET", f"/toy/tasks/{tid}", key=gw.key)).json() for tid in ids]
    assert {s["state"] for s in shown} == {"done"} and {s["billing"] for s in shown} == {"charged"}
    # The family's own actual charge (half the hold) was taken; the rest came back.
    assert {s["charged"] for s in shown} == {PRICE_NANO // 2}
    assert await balance_nano(gw) == (before - 5 * (PRICE_NANO // 2), 5 * (PRICE_NANO // 2))
    assert plugin.family.batches and max(plugin.family.batches) == 2  # batched, never above poll_batch
    # Another family's fetch of the same id is a 404: families do not see each other's tasks.
    reply = await submit(gw, "change", {"taskId": ids[0], "action": "UPSCALE", "index": 1})
    assert reply.status == 404
    assert await gw.gateway.storage.audit() == []


async def test_fetch_refreshes_a_stale_task(gateway_server: StartGateway,
                                            task_config: Callable[..., Config]) -> None:
    """The poller waits a minute before its first poll; a fetch after the poll interval asks the
    upstream itself, so a finished task is not shown stale."""
    timing = {"poll_first_s": 60, "poll_interval_s": 0.3}
    gw = await with_user(await gateway_server(task_config(key="sk-sim-dur200", tasks=timing)))
    task_id = (await submit(gw, "imagine", {"prompt": "fresh"})).json()["result"]
    await asyncio.sleep(0.05)
    early = (await gw.request("GET", f"/imagetask/task/{task_id}/fetch", key=gw.key)).json()
    assert early["status"] in ("NOT_START", "SUBMITTED")  # polled 0.05 s ago at submit: not stale
    await asyncio.sleep(0.35)
    late = (await gw.request("GET", f"/imagetask/task/{task_id}/fetch", key=gw.key)).json()
    assert late["status"] == "SUCCESS" and late["progress"] == "100%"
    stored = await gw.gateway.storage.get_task(task_id)
    assert stored is not None and stored.billing_status == "charged"


async def test_poller_batches_list_by_condition(gateway_server: StartGateway, simulator: Any,
                                                task_config: Callable[..., Config]) -> None:
    timing = {"poll_first_s": 0.2, "poll_interval_s": 0.2}
    gw = await with_user(await gateway_server(task_config(key="sk-sim-dur400", tasks=timing)))
    replies = await asyncio.gather(*(submit(gw, "imagine", {"prompt": f"b{i}"}) for i in range(6)))
    ids = [r.json()["result"] for r in replies]
    for tid in ids:
        await wait_stored(gw, tid, lambda t: t.finished_at is not None)
    async with aiohttp.ClientSession() as s, s.get(simulator.base_url + "/_sim/requests") as resp:
        log = await resp.json()
    sizes = [len(e["body_json_or_null"]["ids"]) for e in log
             if e["path"] == "/imagetask/task/list-by-condition"]
    assert max(sizes) >= 3, sizes  # tasks due together are asked about in one call


async def test_a_task_of_an_uninstalled_family_waits(tgw: GatewayHandle) -> None:
    """A task whose family is not installed here (a replica of another version) is left for later,
    without stalling the poller or losing its hold."""
    storage = tgw.gateway.storage
    orphan = TaskRecord(task_id=secrets.token_hex(8), user_id=tgw.user["id"], key_id=tgw.key_record["id"],
                    family="gone", upstream="sim-image", upstream_task_id="x", status="queued",
                    next_poll_at=time.time() - 100, created_at=time.time() - 10**6)
    await storage.create_task(orphan)
    rescheduled = await wait_stored(tgw, orphan.task_id, lambda t: (t.next_poll_at or 0) > time.time() - 1)
    assert rescheduled.finished_at is None and rescheduled.status == "queued"
    task_id = (await submit(tgw, "imagine", {"prompt": "still works"})).json()["result"]
    assert (await wait_stored(tgw, task_id, lambda t: t.finished_at is not None)).status == "SUCCESS"
