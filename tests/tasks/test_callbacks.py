"""Callbacks: delivered to a receiver the operator admitted, once per status change, in order,
with the spec's fields; refused at submit (400 naming the field) for destinations that are not
public; checked again at send time on the address the connection uses; retried with backoff;
redirects not followed."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from gateway.settings.config import Config
from gateway.tasks import engine_of
from gateway.tasks.callbacks import CallbackSender, Delivery
from gateway.tasks.ssrf import CallbackGuard, UnsafeDestination
from tests import loopback
from tests.conftest import StartGateway
from tests.tasks.helpers import balance_nano, submit, until, wait_stored, wait_task, with_user


@dataclass
class Receiver:
    port: int
    received: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)  # statuses to answer first (then 200)

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[Receiver]:
    rec = Receiver(0)

    async def hook(request: web.Request) -> web.StreamResponse:
        rec.paths.append(request.path)
        if request.path == "/redirect":
            raise web.HTTPFound("/hook")
        status = rec.answers.pop(0) if rec.answers else 200
        if status == 200:
            rec.received.append(orjson.loads(await request.read()))
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/{tail:.*}", hook)
    async with loopback.serving(app, access_log=None) as base:
        rec.port = int(base.rsplit(":", 1)[1])
        yield rec


async def test_callbacks_reach_an_allowed_receiver(gateway_server: StartGateway, receiver: Receiver,
                                                   task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config(tasks={"callback_allowlist": ["127.0.0.1"]})))
    reply = await submit(gw, "imagine", {"prompt": "called back sim:dur600", "notifyHook": receiver.url(),
                                         "state": "order-42"})
    assert reply.status == 200, reply.text
    task_id = reply.json()["result"]
    await wait_task(gw, task_id)
    await until(lambda: _has_final(receiver))
    statuses = [c["status"] for c in receiver.received]
    assert statuses[-1] == "SUCCESS" and statuses.count("SUCCESS") == 1
    assert statuses == sorted(statuses, key=["SUBMITTED", "IN_PROGRESS", "SUCCESS"].index)
    assert len(statuses) == len(set(statuses))  # one callback per status change
    final = receiver.received[-1]
    assert {"id", "action", "status", "imageUrl", "state"} <= set(final)
    assert (final["id"], final["action"], final["state"]) == (task_id, "IMAGINE", "order-42")
    assert final["imageUrl"].startswith("http")
    stored = await gw.gateway.storage.get_task(task_id)
    assert stored is not None and stored.upstream_task_id not in orjson.dumps(receiver.received).decode()


async def _has_final(receiver: Receiver) -> bool:
    return any(c["status"] in ("SUCCESS", "FAILURE") for c in receiver.received)


async def test_failure_callback_and_cidr_allowlist(gateway_server: StartGateway, receiver: Receiver,
                                                   task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config(tasks={"callback_allowlist": ["127.0.0.0/8"]})))
    reply = await submit(gw, "imagine", {"prompt": "sim:taskfail", "notifyHook": receiver.url()})
    task_id = reply.json()["result"]
    await wait_task(gw, task_id)
    await until(lambda: _has_final(receiver))
    final = receiver.received[-1]
    assert final["status"] == "FAILURE" and final["id"] == task_id and final["state"] is None


PRIVATE_URLS = [
    "http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/hook", "http://192.168.0.10/",
    "http://172.16.5.4/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://100.64.0.1/", "http://224.0.0.1/",
    "http://[fd00:ec2::254]/", "ftp://example.com/hook", "http://user:pw@8.8.8.8/", "not a url",
    # Other spellings of loopback that resolvers accept.
    "http://2130706433/", "http://0x7f000001/", "http://0/", "http://127.1/", "http://[::ffff:7f00:1]/",
]


async def test_private_destinations_are_refused_at_submit(gateway_server: StartGateway,
                                                          task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config()))
    before = await balance_nano(gw)
    for url in PRIVATE_URLS:
        reply = await submit(gw, "imagine", {"prompt": "x", "notifyHook": url})
        assert reply.status == 400, (url, reply.text)
        assert reply.json()["error"]["param"] == "notifyHook", url
    assert await balance_nano(gw) == before
    assert await gw.gateway.storage.due_tasks(1e12, 10) == []


async def test_follow_ups_check_their_hook_too(gateway_server: StartGateway,
                                               task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config()))
    task_id = (await submit(gw, "imagine", {"prompt": "x"})).json()["result"]
    await wait_task(gw, task_id)
    reply = await submit(gw, "change", {"taskId": task_id, "action": "UPSCALE", "index": 1,
                                        "notifyHook": "http://10.0.0.1/x"})
    assert reply.status == 400 and reply.json()["error"]["param"] == "notifyHook"


def test_guard_rules() -> None:
    guard = CallbackGuard(["hooks.internal", "10.9.0.0/16", "fd12::/16"])
    ip = ipaddress.ip_address
    assert guard.address_allowed(ip("8.8.8.8")) and guard.address_allowed(ip("2606:4700::1111"))
    assert guard.address_allowed(ip("10.9.3.4")) and guard.address_allowed(ip("fd12::1"))
    for bad in ("10.8.0.1", "127.0.0.1", "::1", "::ffff:10.0.0.1", "169.254.169.254", "0.0.0.0", "::",
                "224.0.0.5", "ff02::1", "100.100.100.200", "192.0.2.1", "fe80::1", "240.0.0.1"):
        assert not guard.address_allowed(ip(bad)), bad
    assert guard.host_allowed("HOOKS.internal.") and not guard.host_allowed("other.internal")


async def test_host_allowlist_admits_whatever_it_resolves_to() -> None:
    await CallbackGuard(["localhost"]).check_url("http://localhost:1/x")
    with pytest.raises(UnsafeDestination):
        await CallbackGuard().check_url("http://localhost:1/x")


async def test_send_time_check_uses_the_resolved_address(receiver: Receiver) -> None:
    """A URL that passed the accept-time check may resolve elsewhere later (DNS rebinding): the
    sender checks again on the addresses it connects to, and sends nothing to a refused one."""
    sender = CallbackSender(CallbackGuard())
    await sender.start()
    try:
        by_name = await sender.attempt(receiver.url("localhost"), b"{}")  # resolves to loopback
        by_ip = await sender.attempt(receiver.url("127.0.0.1"), b"{}")  # an IP literal
    finally:
        await sender.stop()
    assert not by_name.delivered and by_name.final and "non-public" in by_name.reason
    assert not by_ip.delivered and by_ip.final
    assert receiver.paths == []
    admitted = CallbackSender(CallbackGuard(["localhost"]))
    await admitted.start()
    try:
        assert (await admitted.attempt(receiver.url("localhost"), b'{"ok": 1}')).delivered
    finally:
        await admitted.stop()
    assert receiver.received == [{"ok": 1}]


async def test_delivery_outcomes(receiver: Receiver) -> None:
    sender = CallbackSender(CallbackGuard(["127.0.0.1"]))
    await sender.start()
    try:
        receiver.answers = [503, 404]
        assert (await sender.attempt(receiver.url(), b"{}")) == Delivery(False, False, "HTTP 503")
        assert (await sender.attempt(receiver.url(), b"{}")) == Delivery(False, True, "HTTP 404")
        redirected = await sender.attempt(receiver.url(path="/redirect"), b"{}")
        assert not redirected.delivered and redirected.final and "redirects" in redirected.reason
        assert receiver.paths == ["/hook", "/hook", "/redirect"]  # the redirect was not followed
        gone = await sender.attempt("http://127.0.0.1:9/nothing-listens", b"{}")
        assert not gone.delivered and not gone.final
    finally:
        await sender.stop()


async def test_callbacks_are_retried_and_survive_a_restart(gateway_server: StartGateway,
                                                           receiver: Receiver,
                                                           task_config: Callable[..., Config]) -> None:
    config = task_config(tasks={"callback_allowlist": ["127.0.0.1"]})
    first = await with_user(await gateway_server(config))
    outbox = engine_of(first.gateway).outbox
    outbox.backoff_first_s, outbox.backoff_max_s, outbox.attempts = 0.05, 0.1, 1000
    receiver.answers = [500] * 1000  # down for now
    reply = await submit(first, "imagine", {"prompt": "x sim:dur200", "notifyHook": receiver.url()})
    task_id = reply.json()["result"]
    await wait_stored(first, task_id, lambda t: t.status == "SUCCESS")
    await until(lambda: _attempted(receiver, 3))
    assert receiver.received == []
    await first.stop()  # callbacks still queued in the database
    receiver.answers = []  # the receiver is back
    second = await gateway_server(config)
    await until(lambda: _has_final(receiver))
    statuses = [c["status"] for c in receiver.received]
    assert statuses in (["SUBMITTED", "IN_PROGRESS", "SUCCESS"], ["SUBMITTED", "SUCCESS"]), statuses
    assert all(c["id"] == task_id for c in receiver.received)
    storage: Any = second.gateway.storage
    await until(lambda: _queue_empty(storage))


async def _attempted(receiver: Receiver, n: int) -> bool:
    return len(receiver.paths) >= n


async def _queue_empty(storage: Any) -> bool:
    return not await storage._fetch("SELECT id FROM task_callbacks")


async def test_slow_receiver_never_blocks_the_poller(gateway_server: StartGateway,
                                                     task_config: Callable[..., Config]) -> None:
    """A receiver that never answers: tasks still finish on time (callbacks run beside the poller)."""
    hang = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await hang.wait()
        return web.Response()

    app = web.Application()
    app.router.add_post("/slow", slow)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    gw = await with_user(await gateway_server(task_config(tasks={"callback_allowlist": ["127.0.0.1"]})))
    try:
        ids = [(await submit(gw, "imagine", {"prompt": f"n{i}", "notifyHook": f"http://127.0.0.1:{port}/slow"}))
               .json()["result"] for i in range(3)]
        # Read from storage only (no refresh on fetch): the poller alone finishes them.
        for task_id in ids:
            await wait_stored(gw, task_id, lambda t: t.status == "SUCCESS", timeout_s=4)
    finally:
        hang.set()
        await gw.stop()
        await runner.cleanup()
