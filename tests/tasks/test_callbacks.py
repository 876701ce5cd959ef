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

from gateway.config import Config
from gateway.tasks.callbacks import CallbackSender
from gateway.tasks.ssrf import CallbackGuard, UnsafeDestination
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
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.port = runner.addresses[0][1]
    yield rec
    await runner.cleanup()


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


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.1.2.3/hook", "http://192.168.0.10/",
    "http://172.16.5.4/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://100.64.0.1/", "http://224.0.0.1/",
    "http://[fd00:ec2::254]/", "ftp://example.com/hook", "http://user:pw@8.8.8.8/", "not a url",
])
async def test_private_destinations_are_refused_at_submit(gateway_server: StartGateway, url: str,
                                                          task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config()))
    before = await balance_nano(gw)
    reply = await submit(gw, "imagine", {"prompt": "x", "notifyHook": url})
    assert reply.status == 400, reply.text
    assert reply.json()["error"]["param"] == "notifyHook"
    assert await balance_nano(gw) == before


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
    sender = CallbackSender(CallbackGuard(), attempts=1)
    await sender.start()
    try:
        sender.send("t1", receiver.url("localhost"), b"{}")  # resolves to loopback
        sender.send("t2", receiver.url("127.0.0.1"), b"{}")  # an IP literal, checked by the sender
        await sender.idle()
    finally:
        await sender.stop()
    assert receiver.paths == [] and sender.given_up == 2 and sender.delivered == 0
    admitted = CallbackSender(CallbackGuard(["localhost"]), attempts=1)
    await admitted.start()
    try:
        admitted.send("t3", receiver.url("localhost"), b'{"ok": 1}')
        await admitted.idle()
    finally:
        await admitted.stop()
    assert receiver.received == [{"ok": 1}] and admitted.delivered == 1


async def test_retries_with_backoff_and_no_redirects(receiver: Receiver) -> None:
    sender = CallbackSender(CallbackGuard(["127.0.0.1"]), attempts=4, backoff_first_s=0.01)
    await sender.start()
    try:
        receiver.answers = [500, 503]
        sender.send("t1", receiver.url(), b'{"n": 1}')
        await sender.idle()
        assert receiver.received == [{"n": 1}] and receiver.paths == ["/hook"] * 3
        sender.send("t2", receiver.url(path="/redirect"), b'{"n": 2}')
        await sender.idle()
        assert receiver.paths[-1] == "/redirect" and receiver.received == [{"n": 1}]  # not followed
        receiver.answers = [404]
        sender.send("t3", receiver.url(), b'{"n": 3}')
        await sender.idle()
        assert receiver.paths.count("/hook") == 4  # a 4xx is final: not retried
        assert sender.delivered == 1 and sender.given_up == 2
    finally:
        await sender.stop()


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
