"""The text relay's HTTP/1.1 client (``gateway.upstream.http1``) against a scripted server on
loopback: what it sends, how it reads each kind of answer, when it reuses a connection."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import httptools
import pytest
import trustme
import uvloop

from gateway.upstream import http1, http1_answer
from gateway.upstream.http1 import ConnectFailed, Destination, Disconnected, Http1Client, MalformedAnswer


@dataclass
class Received:
    connection: int
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Script:
    """What the server answers to each request (given the request and its transport)."""

    answer: Callable[[Received, asyncio.Transport], Awaitable[None] | None]
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    tasks: set[asyncio.Future[None]] = field(default_factory=set)  # answers still being written


class _ScriptedProtocol(asyncio.Protocol):
    def __init__(self, script: Script) -> None:
        self._script = script
        script.connections += 1
        self._number = script.connections
        self._parser = httptools.HttpRequestParser(self)
        self._headers: dict[str, str] = {}
        self._body = bytearray()
        self._path = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def on_url(self, url: bytes) -> None:
        self._path = url.decode()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode().lower()] = value.decode()

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        request = Received(self._number, self._path, self._headers, bytes(self._body))
        self._headers, self._body = {}, bytearray()
        self._script.received.append(request)
        outcome = self._script.answer(request, self.transport)
        if outcome is not None:
            self._script.tasks.add(asyncio.ensure_future(outcome))


async def _serve(script: Script, tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, int]:
    server = await asyncio.get_running_loop().create_server(lambda: _ScriptedProtocol(script), "127.0.0.1", 0,
                                                            ssl=tls)
    return server, server.sockets[0].getsockname()[1]


async def _fetch(client: Http1Client, port: int) -> bytes:
    """One call's whole answer body, its connection given back."""
    response = await _post(client, port)
    try:
        return await response.read()
    finally:
        response.release()


@contextlib.asynccontextmanager
async def _upstream(script: Script) -> AsyncIterator[tuple[Http1Client, int]]:
    """A client, and the port of a server that answers by ``script``; both closed at the end."""
    server, port = await _serve(script)
    client = Http1Client()
    try:
        yield client, port
    finally:
        client.close()
        server.close()


def _answer(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = [f"HTTP/1.1 {status}", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _fixed(raw: bytes) -> Callable[[Received, asyncio.Transport], None]:
    return lambda _request, transport: transport.write(raw)


async def _post(client: Http1Client, port: int, body: bytes = b"{}", idle_s: float = 5.0,
                headers: dict[str, str] | None = None, scheme: str = "http",
                first_byte_s: float = 5, connect_s: float = 2) -> http1.UpstreamAnswer:
    destination = Destination(f"{scheme}://127.0.0.1:{port}/v1/chat/completions",
                              {"Content-Type": "application/json", "Authorization": "Bearer sk-1"})
    return await client.post(destination.origin, destination.head_with(headers or {}), body,
                             connect_s=connect_s, idle_s=idle_s, first_byte_s=first_byte_s)


async def test_sends_the_head_and_body_and_reuses_the_connection() -> None:
    script = Script(_fixed(_answer(b'{"ok":true}', "Content-Type: application/json")))
    async with _upstream(script) as (client, port):
        for _ in range(3):
            answer = await _post(client, port, body=b'{"model":"m"}')
            assert answer.status == 200 and answer.headers.get("CONTENT-TYPE") == "application/json"
            assert await answer.read() == b'{"ok":true}'
            answer.release()
        assert script.connections == 1  # one kept-alive connection served all three
        first = script.received[0]
        assert first.path == "/v1/chat/completions" and first.body == b'{"model":"m"}'
        assert first.headers["authorization"] == "Bearer sk-1"
        assert first.headers["host"] == f"127.0.0.1:{port}" and first.headers["content-length"] == "13"


@pytest.mark.parametrize("chunked", [False, True])
async def test_on_sent_is_called_once_the_request_left_before_the_answer(chunked: bool) -> None:
    """``on_sent`` runs as soon as the request is on the wire, while the upstream still works
    (the relay starts a stream's hold move there, to overlap the upstream's time): here the
    server holds its answer until it has seen ``on_sent`` called."""
    called: list[int] = []
    release = asyncio.Event()

    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        await release.wait()
        transport.write(_answer(b"{}"))

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"a":'
        yield b"1}"

    def on_sent() -> None:
        called.append(len(called))
        release.set()

    script = Script(answer)
    async with _upstream(script) as (client, port):
        destination = Destination(f"http://127.0.0.1:{port}/v1/x", {})
        body: bytes | AsyncIterator[bytes] = chunks() if chunked else b'{"a":1}'
        response = await asyncio.wait_for(client.post(
            destination.origin, destination.head, body, connect_s=2, first_byte_s=5, idle_s=5,
            on_sent=on_sent), 5)
        assert await response.read() == b"{}"
        response.release()
    assert called == [0]
    assert script.received[0].body == b'{"a":1}'


async def test_a_call_header_replaces_a_fixed_one_of_any_case() -> None:
    destination = Destination("http://h/x", {"Content-Type": "application/json", "X-Key": "a"})
    head = destination.head_with({"content-type": "multipart/form-data; boundary=b"}).decode()
    assert "application/json" not in head and "content-type: multipart/form-data; boundary=b" in head
    assert "X-Key: a\r\n" in head and destination.head_with({}) is destination.head


@pytest.mark.parametrize("bad", [{"X-A": "v\r\nX-Injected: 1"}, {"X-A\n": "v"}, {"X-A": "v\0"}])
def test_a_header_that_would_break_its_line_is_refused(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="line break or NUL"):
        Destination("http://h/x", bad)
    with pytest.raises(ValueError, match="line break or NUL"):
        Destination("http://h/x", {}).head_with(bad)


def test_the_path_is_escaped_as_a_url_needs_and_only_http_is_accepted() -> None:
    head = Destination("http://h:8080/v1beta/models/my model:generate?alt=sse&k=%2F", {}).head
    line = b"POST /v1beta/models/my%20model:generate?alt=sse&k=%2F HTTP/1.1\r\nHost: h:8080\r\n"
    assert head.startswith(line)
    with pytest.raises(ValueError, match="not an http"):
        Destination("ftp://h/x", {})


async def test_a_chunked_answer_is_read_as_it_comes() -> None:
    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n")
        for n in range(3):
            data = f"data: {n}\n\n".encode()
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))
            await asyncio.sleep(0.02)
        transport.write(b"0\r\n\r\n")

    script = Script(answer)
    async with _upstream(script) as (client, port):
        answer_ = await _post(client, port)
        pieces = []
        while piece := await answer_.readany():
            pieces.append(piece)
        assert len(pieces) == 3 and b"".join(pieces) == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
        answer_.close()  # read to its end: the connection is kept all the same
        await (await _post(client, port)).read()
        assert script.connections == 1


async def test_an_answer_without_length_ends_with_its_connection() -> None:
    def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")
        transport.close()

    script = Script(answer)
    async with _upstream(script) as (client, port):
        for _ in range(2):
            assert await _fetch(client, port) == b"all of it"
        assert script.connections == 2  # never reused


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_answers_are_decoded(encoding: str) -> None:
    body = b'{"text":"' + b"hello " * 2000 + b'"}'
    if encoding == "gzip":
        packed = gzip.compress(body)
    elif encoding == "deflate":
        packed = zlib.compress(body)
    else:
        squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        packed = squeeze.compress(body) + squeeze.flush()
    name = encoding.removeprefix("raw-")
    async with _upstream(Script(_fixed(_answer(packed, f"Content-Encoding: {name}")))) as (client, port):
        assert await (await _post(client, port)).read() == body


async def test_a_body_that_does_not_decode_is_a_malformed_answer() -> None:
    script = Script(_fixed(_answer(b"not gzip at all", "Content-Encoding: gzip")))
    async with _upstream(script) as (client, port):
        with pytest.raises(MalformedAnswer, match="does not decode"):
            await (await _post(client, port)).read()


async def test_bytes_that_are_not_http_are_a_malformed_answer() -> None:
    async with _upstream(Script(_fixed(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))) as (client, port):
        with pytest.raises(MalformedAnswer, match=r"not HTTP/1\.1"):
            await _post(client, port)


async def test_a_cut_answer_gives_what_came_then_fails() -> None:
    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst part")
        await asyncio.sleep(0.05)
        transport.abort()

    async with _upstream(Script(answer)) as (client, port):
        response = await _post(client, port)
        assert await response.readany() == b"first part"
        with pytest.raises(Disconnected):
            await response.readany()


async def test_a_silent_upstream_times_out_per_read() -> None:
    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        await asyncio.sleep(5)

    async with _upstream(Script(answer)) as (client, port):
        response = await _post(client, port, idle_s=0.1)
        assert await response.readany() == b"hello"
        with pytest.raises(TimeoutError):
            await response.readany()
        response.close()  # not read to its end: the connection is dropped


async def test_a_head_later_than_the_first_byte_deadline_times_out_and_closes_its_connection() -> None:
    async def answer(request: Received, transport: asyncio.Transport) -> None:
        if request.connection == 1:
            await asyncio.sleep(5)  # the first connection never answers
        transport.write(_answer(b"late enough"))

    script = Script(answer)
    async with _upstream(script) as (client, port):
        began = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await _post(client, port, connect_s=0.1, first_byte_s=0.15)
        # The head's deadline is the call's start plus connect_s and first_byte_s, however fast
        # the connection came.
        assert 0.24 <= asyncio.get_running_loop().time() - began < 1.5
        # Its connection was closed, not kept for the next call, which gets a new one.
        assert await (await _post(client, port, first_byte_s=2)).read() == b"late enough"
        assert script.connections == 2


async def test_a_wait_for_a_free_connection_counts_against_the_first_byte_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "MAX_PER_ORIGIN", 1)
    script = Script(_fixed(_answer(b"ok")))
    async with _upstream(script) as (client, port):
        held = await _post(client, port)  # the origin's one connection, not given back
        with pytest.raises(TimeoutError):
            await _post(client, port, connect_s=0.05, first_byte_s=0.05)
        await held.read()
        held.release()
        assert await (await _post(client, port, first_byte_s=2)).read() == b"ok"  # the slot came back
        assert script.connections == 1


async def test_an_unfinished_answer_closes_its_connection() -> None:
    async def answer(request: Received, transport: asyncio.Transport) -> None:
        if request.connection == 1:
            transport.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        else:
            transport.write(_answer(b"second"))

    script = Script(answer)
    async with _upstream(script) as (client, port):
        response = await _post(client, port)
        assert await response.readany() == b"hello"
        response.close()
        assert await (await _post(client, port)).read() == b"second"
        assert script.connections == 2


async def test_a_connection_the_upstream_closed_while_idle_is_not_reused() -> None:
    def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(_answer(b"ok"))
        asyncio.get_running_loop().call_later(0.02, transport.close)  # its keep-alive ran out

    script = Script(answer)
    async with _upstream(script) as (client, port):
        assert await _fetch(client, port) == b"ok"
        await asyncio.sleep(0.1)
        assert await (await _post(client, port)).read() == b"ok"
        assert script.connections == 2


async def test_a_slow_reader_holds_a_bounded_buffer() -> None:
    piece = b"x" * 65536

    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(200):  # 13 MB, written as fast as the socket takes it
            transport.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            await asyncio.sleep(0)
        transport.write(b"0\r\n\r\n")

    async with _upstream(Script(answer)) as (client, port):
        response = await _post(client, port)
        total, most = 0, 0
        while data := await response.readany():
            total += len(data)
            most = max(most, len(data))
            await asyncio.sleep(0.002)
        assert total == 200 * len(piece)
        # Reading stops once HIGH_WATER is buffered; one socket read more may land on top.
        assert most <= http1_answer.HIGH_WATER + 2 * 1024 * 1024, most


async def test_a_body_of_chunks_goes_chunked_or_with_the_length_it_was_given() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for part in (b"one,", b"two,", b"three"):
            yield part

    script = Script(_fixed(_answer(b"ok")))
    async with _upstream(script) as (client, port):
        destination = Destination(f"http://127.0.0.1:{port}/up", {})
        for headers in ({}, {"Content-Length": "13"}):
            response = await client.post(destination.origin, destination.head_with(headers), chunks(),
                                         connect_s=2, first_byte_s=5, idle_s=2)
            assert await response.read() == b"ok"
            response.release()
        chunked, sized = script.received
        assert chunked.body == sized.body == b"one,two,three"
        assert chunked.headers["transfer-encoding"] == "chunked" and "content-length" not in chunked.headers
        assert sized.headers["content-length"] == "13" and "transfer-encoding" not in sized.headers


async def test_calls_past_the_cap_of_an_origin_wait_for_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "MAX_PER_ORIGIN", 2)
    script = Script(_fixed(_answer(b"ok")))
    async with _upstream(script) as (client, port):
        first, second = await _post(client, port), await _post(client, port)
        third = asyncio.ensure_future(_post(client, port))
        await asyncio.sleep(0.05)
        assert not third.done() and script.connections == 2
        await first.read()
        first.release()  # its connection serves the third call
        assert await (await asyncio.wait_for(third, 2)).read() == b"ok"
        assert script.connections == 2
        second.close()


async def test_a_refused_connection_is_connect_failed() -> None:
    server, port = await _serve(Script(_fixed(b"")))
    server.close()
    await server.wait_closed()
    client = Http1Client()
    with pytest.raises(ConnectFailed, match="cannot connect"):
        await _post(client, port)


async def test_https_checks_the_upstreams_certificate() -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    server, port = await _serve(Script(_fixed(_answer(b"secret ok"))), tls=server_tls)
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)
    client, stranger = Http1Client(tls=trusting), Http1Client()
    try:
        assert await (await _post(client, port, scheme="https")).read() == b"secret ok"
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await _post(stranger, port, scheme="https")  # the system's CAs do not know this one
    finally:
        client.close()
        stranger.close()
        server.close()


class _EarlyRefusal(asyncio.Protocol):
    """Answers 413 as soon as a request's head is in, then closes or stops reading."""

    def __init__(self, then_close: bool) -> None:
        self._then_close = then_close
        self._answered = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._answered:
            self._answered = True
            self.transport.write(_answer(b'{"error":"too large"}', status="413 Payload Too Large"))
            if self._then_close:
                self.transport.close()
            else:
                self.transport.pause_reading()  # never reads the rest of the body


@pytest.mark.parametrize("then_close", [True, False], ids=["then-closes", "stops-reading"])
async def test_an_answer_before_the_whole_body_is_read_not_lost(then_close: bool) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _EarlyRefusal(then_close), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = Http1Client()
    try:
        response = await asyncio.wait_for(_post(client, port, body=b"x" * (64 * 1024 * 1024)), 10)
        assert response.status == 413 and await response.read() == b'{"error":"too large"}'
        response.release()
        assert not client._idle.get(response._carrier.origin)  # type: ignore[attr-defined]
    finally:
        client.close()
        server.close()


async def test_the_headers_of_an_informational_answer_are_not_the_answers() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\nContent-Encoding: gzip\r\n\r\n"
    async with _upstream(Script(_fixed(early + _answer(b"plain", "X-Real: 1")))) as (client, port):
        response = await _post(client, port)
        assert response.status == 200 and await response.read() == b"plain"
        assert "link" not in response.headers and response.headers["x-real"] == "1"


async def test_bytes_after_an_answer_close_its_connection() -> None:
    stray = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"
    script = Script(lambda request, transport: transport.write(
        _answer(b"ok") + (stray if request.connection == 1 else b"")))
    async with _upstream(script) as (client, port):
        for _ in range(2):
            assert await _fetch(client, port) == b"ok"
        assert script.connections == 2  # the first was not given back to the pool


async def test_a_request_on_a_connection_closed_while_idle_is_sent_again_once() -> None:
    def answer(request: Received, transport: asyncio.Transport) -> None:
        if request.connection == 1 and len(script.received) == 2:
            transport.close()  # gone as the second request came: as a keep-alive timeout does
        else:
            transport.write(_answer(b"ok"))

    script = Script(answer)
    async with _upstream(script) as (client, port):
        for _ in range(2):
            assert await _fetch(client, port) == b"ok"
        assert script.connections == 2 and len(script.received) == 3


async def test_a_new_connection_closed_without_an_answer_is_not_retried() -> None:
    script = Script(lambda _request, transport: transport.close())
    async with _upstream(script) as (client, port):
        with pytest.raises(Disconnected):
            await _post(client, port)
        assert len(script.received) == 1


async def test_a_lost_connection_frees_its_slot_even_unreleased(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "MAX_PER_ORIGIN", 1)

    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
        await asyncio.sleep(0.02)
        transport.abort()

    async with _upstream(Script(answer)) as (client, port):
        await _post(client, port)  # never released
        await asyncio.sleep(0.1)
        assert (await asyncio.wait_for(_post(client, port), 2)).status == 200


async def test_a_body_unlike_its_announced_length_is_refused() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"thirteen byte"

    async with _upstream(Script(_fixed(_answer(b"ok")))) as (client, port):
        destination = Destination(f"http://127.0.0.1:{port}/up", {"Content-Length": "100"})
        with pytest.raises(ValueError, match="13 bytes"):
            await client.post(destination.origin, destination.head, chunks(), connect_s=2, first_byte_s=5,
                              idle_s=2)


@pytest.mark.parametrize(("packed", "why"), [
    (_answer(b"data", "Content-Encoding: br"), "not asked for"),
    (_answer(gzip.compress(b"x" * 5000)[:-12], "Content-Encoding: gzip"), "ended early"),
])
async def test_a_body_that_cannot_be_decoded_whole_is_malformed(packed: bytes, why: str) -> None:
    async with _upstream(Script(_fixed(packed))) as (client, port):
        with pytest.raises(MalformedAnswer, match=why):
            await (await _post(client, port)).read()


def test_credentials_in_the_url_become_basic_authorization_unless_configured() -> None:
    plain = Destination("https://user:p%40ss@h/x", {}).head.decode()
    assert "Host: h\r\n" in plain and "Authorization: Basic dXNlcjpwQHNz\r\n" in plain  # user:p@ss
    configured = Destination("https://user:pw@h/x", {"authorization": "Bearer sk"}).head.decode()
    assert "Basic" not in configured and "authorization: Bearer sk\r\n" in configured


@pytest.mark.parametrize("scenario", [
    test_sends_the_head_and_body_and_reuses_the_connection, test_a_chunked_answer_is_read_as_it_comes,
    test_a_cut_answer_gives_what_came_then_fails, test_a_slow_reader_holds_a_bounded_buffer,
    test_https_checks_the_upstreams_certificate, test_a_refused_connection_is_connect_failed,
    test_a_head_later_than_the_first_byte_deadline_times_out_and_closes_its_connection,
], ids=lambda scenario: scenario.__name__.removeprefix("test_"))
async def test_on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    """The gateway serves on uvloop, whose transports differ from asyncio's (the tests above run on
    the suite's asyncio loop): the same scenarios, each on a uvloop loop of its own thread."""
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), 15)

    await asyncio.to_thread(uvloop.run, bounded())
