"""Property 5: an SSRF corpus against every URL the gateway itself connects to. Today that is the
task callback (``notifyHook`` and the like): media URLs in requests are passed to the upstream,
never fetched by the gateway (``gateway.wire.media_url``), and the upstream's own result URLs come
from the operator's configured upstream, not the client.

Every payload aims at a canary listener on loopback (names are pointed at it by a fake resolver on
the running loop), and goes through both guards: the accept-time check (``check_url``, through
HTTP for the image-task family) and the send-time sender (``CallbackSender.attempt``, whose
resolver checks the very addresses it connects to). The canary must see 0 connections.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio

from gateway.settings.config import Config
from gateway.tasks.callbacks import CallbackSender
from gateway.tasks.ssrf import CallbackGuard, UnsafeDestination
from tests.conftest import StartGateway
from tests.tasks.helpers import submit, with_user
from tests.tasks.helpers import task_config as task_config  # the fixture, used by name

PUBLIC = "93.184.216.34"  # what the rebinding name answers first (a public address)


class Canary:
    def __init__(self) -> None:
        self.connections = 0
        self.port = 0
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        async def seen(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            writer.close()

        self.server = await asyncio.start_server(seen, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


@pytest_asyncio.fixture
async def canary() -> AsyncIterator[Canary]:
    c = Canary()
    await c.start()
    yield c
    assert c.server is not None
    c.server.close()
    await c.server.wait_closed()


def corpus(port: int) -> list[str]:
    p = port
    return [
        f"http://127.0.0.1:{p}/", f"http://127.1:{p}/", f"http://2130706433:{p}/", f"http://0x7f000001:{p}/",
        f"http://017700000001:{p}/", f"http://0177.0.0.1:{p}/", f"http://0:{p}/", f"http://0.0.0.0:{p}/",
        f"http://[::1]:{p}/", f"http://[::]:{p}/", f"http://[::ffff:127.0.0.1]:{p}/", f"http://[::ffff:7f00:1]:{p}/",
        f"http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/", f"http://[::127.0.0.1]:{p}/", f"http://[64:ff9b::7f00:1]:{p}/",
        f"http://[2002:7f00:1::1]:{p}/", f"http://localhost:{p}/",
        f"http://LOCALHOST.:{p}/", f"http://10.0.0.1:{p}/", f"http://172.16.0.1:{p}/", f"http://192.168.1.1:{p}/",
        "http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "http://[fd00:ec2::254]/", "http://100.100.100.200/", f"http://100.64.0.1:{p}/", f"http://[fe80::1]:{p}/",
        f"http://[fc00::1]:{p}/", f"http://224.0.0.1:{p}/", f"http://255.255.255.255:{p}/",
        f"http://192.0.2.1:{p}/", f"http://198.18.0.1:{p}/", f"http://user:pw@127.0.0.1:{p}/",
        f"ftp://127.0.0.1:{p}/", "file:///etc/passwd", f"gopher://127.0.0.1:{p}/",
        # Names: one resolving to loopback, one to a private address, one rebinding.
        f"http://loopback.canary.test:{p}/", f"http://private.canary.test:{p}/",
        f"http://rebind.canary.test:{p}/", f"http://mixed.canary.test:{p}/",
    ]


def fake_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names of the corpus resolved by a fake on the running loop; ``rebind`` answers a public
    address to the first lookup and loopback to every later one."""
    loop = asyncio.get_running_loop()
    real = loop.getaddrinfo
    lookups: dict[str, int] = {}

    async def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = str(host).lower().rstrip(".")
        answers = {"loopback.canary.test": ["127.0.0.1"], "private.canary.test": ["10.1.2.3"],
                   "mixed.canary.test": [PUBLIC, "127.0.0.1"]}
        if name == "rebind.canary.test":
            lookups[name] = lookups.get(name, 0) + 1
            answers[name] = [PUBLIC] if lookups[name] == 1 else ["127.0.0.1"]
        if name in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, int(port or 0))) for ip in answers[name]]
        return await real(host, port, *args, **kwargs)

    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


async def test_corpus_never_reaches_the_canary(canary: Canary, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch)
    urls = corpus(canary.port)
    assert len(urls) >= 30
    guard = CallbackGuard()
    sender = CallbackSender(guard, timeout_s=2)
    await sender.start()
    try:
        accepted_at_submit = []
        for url in urls:
            try:
                await guard.check_url(url)
                accepted_at_submit.append(url)
            except UnsafeDestination:
                pass
            delivery = await sender.attempt(url, b"{}")
            assert not delivery.delivered, (url, delivery)
    finally:
        await sender.stop()
    # Only the rebinding name passes the accept-time check (its first answer is public); the
    # send-time resolver then sees loopback and refuses it.
    assert accepted_at_submit == [f"http://rebind.canary.test:{canary.port}/"]
    assert canary.connections == 0


async def test_redirect_inward_is_not_followed(canary: Canary, monkeypatch: pytest.MonkeyPatch) -> None:
    """An admitted receiver (allowlisted by the operator) answering 302 to the canary: the sender
    does not follow redirects, so the canary sees nothing."""
    async def redirect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{canary.port}/\r\n"
                     "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(redirect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    sender = CallbackSender(CallbackGuard(["127.0.0.1/32"]), timeout_s=2)
    await sender.start()
    try:
        delivery = await sender.attempt(f"http://127.0.0.1:{port}/hook", b"{}")
    finally:
        await sender.stop()
        server.close()
        await server.wait_closed()
    assert not delivery.delivered and "redirect" in delivery.reason
    assert canary.connections == 0


async def test_corpus_is_refused_at_submit(gateway_server: StartGateway, canary: Canary,
                                           task_config: Callable[..., Config],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch)
    gw = await with_user(await gateway_server(task_config()))
    for url in corpus(canary.port):
        reply = await submit(gw, "imagine", {"prompt": "x", "notifyHook": url})
        if "rebind" in url:
            continue  # accepted (public at the first lookup): the send-time guard is tested above
        assert reply.status == 400, (url, reply.text)
        assert reply.json()["error"]["param"] == "notifyHook"
    assert canary.connections == 0
