"""Hostile clients, through raw sockets, against the gateway on the default server (granian): an
endless request head, a head dripped for longer than the head deadline, a request that carries both
``Content-Length`` and ``Transfer-Encoding`` (request smuggling), and chunked bodies whose chunk
sizes are not numbers. Each attack must leave the gateway unharmed: ``/healthz`` answered within
100 ms of its idle p99 all along, this process's peak memory (the embedded server and the app run
in it) bounded, no traceback or asyncio error report in the logs, and the next call served.

The raw clients are blocking sockets in threads, each with a reader of its own: a server that
refuses a head while the client is still sending closes with unread input, and only a reader that
kept up sees its answer before the reset (asyncio's stream reader reports the failed write first).
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import openai
import pytest
import pytest_asyncio

from gateway.server.servers import DEFAULT_SERVER
from tests.conftest import GatewayHandle
from tests.hostile.upstream import MIB, HealthzSampler, PeakRss, log_faults
from tests.servers import embedded

HEALTHZ_SLACK_S = 0.1
RSS_GROWTH_BOUND = 24 * MIB  # far under what the attacks send (32 MB in one head)
HEAD_DEADLINE_S = 5.0  # limits.header_timeout_s, the default
READ_LIMIT_S = 15.0  # the longest any raw exchange may last
STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3})")

# What these tests ask is what granian does; uvicorn and hypercorn enforce less (no head deadline on
# uvicorn; on both, what follows a request with Content-Length and Transfer-Encoding is served as a
# second request: gateway.server.options, tests/servers/test_smuggling.py).
pytestmark = pytest.mark.skipif(embedded.chosen_server() != DEFAULT_SERVER,
                                reason="the default server's behaviour (GATEWAY_TEST_SERVER picks another)")


@dataclass
class Exchange:
    """What a raw client saw: everything the server sent before it closed, and when that was."""

    received: bytes
    closed_after_s: float
    send_error: str | None

    @property
    def statuses(self) -> list[int]:
        """The status of every response in ``received`` (a second one may follow a body at once)."""
        return [int(status) for status in STATUS_LINE.findall(self.received)]


def raw_exchange(port: int, pieces: Iterable[bytes], pace_s: float = 0.0) -> Exchange:
    """Send ``pieces`` (``pace_s`` apart) on a new connection while a reader thread takes all the
    server sends, until it closes the connection (or ``READ_LIMIT_S``)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(READ_LIMIT_S)
    started = time.monotonic()
    received: list[bytes] = []
    closed_at: list[float] = []

    def read() -> None:
        try:
            while chunk := sock.recv(65536):
                received.append(chunk)
        except OSError:  # a reset, or READ_LIMIT_S
            pass
        closed_at.append(time.monotonic())

    reader = threading.Thread(target=read)
    reader.start()
    send_error = None
    try:
        for piece in pieces:
            if not reader.is_alive():
                break
            sock.sendall(piece)
            if pace_s:
                time.sleep(pace_s)
    except OSError as exc:  # the server closed under the client: expected of a refusal
        send_error = repr(exc)
    reader.join(READ_LIMIT_S + 1)
    sock.close()
    return Exchange(b"".join(received), (closed_at or [time.monotonic()])[0] - started, send_error)


@dataclass
class Harm:
    healthz: HealthzSampler
    rss_growth_bytes: int


@pytest.fixture
def port(gw: GatewayHandle) -> int:
    return int(gw.base_url.rsplit(":", 1)[1])


async def _attacked(gw: GatewayHandle, caplog: pytest.LogCaptureFixture,
                    *attacks: asyncio.Future[Exchange]) -> tuple[list[Exchange], Harm]:
    """The exchanges of ``attacks`` (started by the caller), ``/healthz`` sampled and peak memory
    watched while they last."""
    sampler = HealthzSampler(gw.http, gw.base_url)
    with PeakRss() as rss:
        async with sampler.running():
            exchanges = await asyncio.gather(*attacks)
    return list(exchanges), Harm(sampler, rss.growth_bytes)


async def _assert_unharmed(gw: GatewayHandle, caplog: pytest.LogCaptureFixture, harm: Harm,
                           idle_p99_s: float) -> None:
    assert harm.healthz.p99 <= idle_p99_s + HEALTHZ_SLACK_S, \
        (f"idle p99 {idle_p99_s * 1000:.1f} ms", harm.healthz.stats())
    assert harm.rss_growth_bytes < RSS_GROWTH_BOUND, f"peak RSS grew {harm.rss_growth_bytes / MIB:.0f} MiB"
    client = openai.AsyncOpenAI(api_key=gw.key, base_url=gw.base_url + "/v1", max_retries=0)
    try:
        answer = await client.chat.completions.create(
            model="sim-chat", messages=[{"role": "user", "content": "after the attack"}])
    finally:
        await client.close()
    assert answer.choices[0].message.content
    assert log_faults(caplog.records) == []


@pytest_asyncio.fixture
async def idle_p99(gw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> AsyncIterator[float]:
    caplog.set_level(logging.INFO)
    yield await HealthzSampler(gw.http, gw.base_url).idle_p99()


def _in_thread(executor: ThreadPoolExecutor, port: int, pieces: Iterable[bytes],
               pace_s: float = 0.0) -> asyncio.Future[Exchange]:
    return asyncio.get_running_loop().run_in_executor(executor, raw_exchange, port, pieces, pace_s)


def _reached_app(caplog: pytest.LogCaptureFixture, path: str) -> bool:
    return any(r.name == "gateway.access" and f'"path":"{path}"' in r.getMessage() for r in caplog.records)


async def test_a_32_mb_header_is_refused_431_at_once(gw: GatewayHandle, port: int, idle_p99: float,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Huge: "
    pieces = [head, *(b"a" * 65536 for _ in range(32 * MIB // 65536)), b"\r\n\r\n"]
    with ThreadPoolExecutor(1) as executor:
        [exchange], harm = await _attacked(gw, caplog, _in_thread(executor, port, pieces))
    assert exchange.statuses == [431], exchange.received[:300]
    assert exchange.closed_after_s < 1.0, exchange.closed_after_s  # long before the 32 MB were sent
    await _assert_unharmed(gw, caplog, harm, idle_p99)


SLOW_CLIENTS = 20
DRIP = b"a" * 512  # every 0.1 s: 25 KB by the deadline, under limits.request_head_bytes


async def test_heads_dripped_past_the_deadline_are_cut_at_it(gw: GatewayHandle, port: int, idle_p99: float,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    pieces = [b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", *(DRIP for _ in range(100))]
    with ThreadPoolExecutor(SLOW_CLIENTS) as executor:
        exchanges, harm = await _attacked(gw, caplog, *(_in_thread(executor, port, pieces, 0.1)
                                                       for _ in range(SLOW_CLIENTS)))
    for exchange in exchanges:
        assert HEAD_DEADLINE_S - 0.5 < exchange.closed_after_s < HEAD_DEADLINE_S + 2, exchange.closed_after_s
        assert all(status >= 400 for status in exchange.statuses), exchange.received[:300]
    assert len(harm.healthz.samples) > 50  # other clients were answered all along
    await _assert_unharmed(gw, caplog, harm, idle_p99)


SMUGGLED = b"GET /smuggled-probe HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize("encoding", [b"chunked", b" chunked", b"chunked, identity", b"xchunked"])
async def test_content_length_beside_transfer_encoding(gw: GatewayHandle, port: int, idle_p99: float,
                                                       caplog: pytest.LogCaptureFixture,
                                                       encoding: bytes) -> None:
    """The body ends at ``0\\r\\n\\r\\n`` by Transfer-Encoding and after the smuggled request by
    Content-Length: a server that took the one while a proxy in front took the other would serve
    a request nobody sent. Granian refuses the request (400) or follows Transfer-Encoding alone,
    and then closes the connection (RFC 9112, 6.1): here the app's 400 for the empty body it got,
    ``Connection: close``. One answer only; the smuggled request never reaches the app."""
    body = b"0\r\n\r\n" + SMUGGLED
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + gw.key.encode()
               + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
               + b"\r\nTransfer-Encoding: " + encoding + b"\r\n\r\n" + body)
    with ThreadPoolExecutor(1) as executor:
        [exchange], harm = await _attacked(gw, caplog, _in_thread(executor, port, [request]))
    assert exchange.statuses == [400], exchange.received
    assert b"\r\nconnection: close\r\n" in exchange.received.lower(), exchange.received[:300]
    assert exchange.closed_after_s < 1.0, exchange.closed_after_s  # not kept alive for the rest
    assert not _reached_app(caplog, "/smuggled-probe")
    await _assert_unharmed(gw, caplog, harm, idle_p99)


@pytest.mark.parametrize("size", [b"zz", b"ffffffffffffffffffffffff", b"-1", b"+5", b"0x10", b""])
async def test_bad_chunk_sizes(gw: GatewayHandle, port: int, idle_p99: float,
                               caplog: pytest.LogCaptureFixture, size: bytes) -> None:
    """A chunk size that is not a hex number (or overflows) is refused and the connection closed;
    never a 5xx, and nothing is relayed or charged. Granian reports a body it cannot decode to the
    app as the client's disconnect, which the app answers as it answers one: 499 (as its access
    log says), no body. (On uvicorn and hypercorn, h11 refuses the body: 400 from the server.)"""
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + gw.key.encode()
               + b"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
               + size + b"\r\n" + b'{"model":"sim-chat"}' + b"\r\n0\r\n\r\n")
    with ThreadPoolExecutor(1) as executor:
        [exchange], harm = await _attacked(gw, caplog, _in_thread(executor, port, [request]))
    assert exchange.statuses in ([], [400], [499]), exchange.received[:300]
    assert exchange.closed_after_s < 1.0, exchange.closed_after_s
    used = await gw.admin("GET", f"/admin/logs?user_id={gw.user['id']}")
    assert used.json()["total"] == 0, used.text
    await _assert_unharmed(gw, caplog, harm, idle_p99)
