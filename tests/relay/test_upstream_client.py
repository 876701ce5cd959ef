"""The upstream HTTP client (``gateway.upstream.client``, aiohttp under the gateway's limits) against
a scripted server on loopback: what it sends, how it reads each kind of answer, when it reuses a
connection, and what an answer may make it hold or wait for."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import os
import ssl
import sys
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
import trustme
import uvloop

from gateway.settings.config import LimitsConfig, UpstreamTimeouts
from gateway.upstream.client import AnswerTooLarge, Destination, UpstreamAnswer, UpstreamClient
from tests.hostile.upstream import PeakRss
from tests.relay.scripted_upstream import EarlyRefusal, Received, Script, answer_bytes, fixed, serve

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def _started(limits: LimitsConfig | None = None) -> AsyncIterator[UpstreamClient]:
    client = UpstreamClient(limits or LimitsConfig())
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


@contextlib.asynccontextmanager
async def _upstream(script: Script, limits: LimitsConfig | None = None,
                    ) -> AsyncIterator[tuple[UpstreamClient, int]]:
    """A client, and the port of a server that answers by ``script``; both closed at the end."""
    server, port = await serve(script)
    try:
        async with _started(limits) as client:
            yield client, port
    finally:
        server.close()
        for task in script.tasks:
            task.cancel()


def _timeouts(connect_s: float = 2, first_byte_s: float = 5, idle_s: float = 5,
              total_s: float = 600) -> UpstreamTimeouts:
    return UpstreamTimeouts(connect_s=connect_s, first_byte_s=first_byte_s, idle_s=idle_s, total_s=total_s)


async def _post(client: UpstreamClient, port: int, body: bytes | AsyncIterator[bytes] = b"{}",
                headers: dict[str, str] | None = None, url: str = "",
                timeouts: UpstreamTimeouts | None = None, on_sent: Callable[[], None] | None = None,
                ) -> UpstreamAnswer:
    destination = Destination(url or f"http://127.0.0.1:{port}/v1/chat/completions",
                              {"Content-Type": "application/json", "Authorization": "Bearer sk-1"})
    return await client.request("POST", destination, destination.headers_with(headers or {}), body,
                                timeouts or _timeouts(), on_sent=on_sent)


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _fetch(client: UpstreamClient, port: int) -> bytes:
    """One call's whole answer body, its connection given back."""
    response = await _post(client, port)
    try:
        return await response.read()
    finally:
        response.release()


async def test_sends_the_head_and_body_and_reuses_the_connection() -> None:
    script = Script(fixed(answer_bytes(b'{"ok":true}', "Content-Type: application/json")))
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
async def test_on_sent_is_called_once_before_the_answer(chunked: bool) -> None:
    """``on_sent`` runs as the request leaves, while the upstream still works (the relay starts a
    stream's hold move there, to overlap the upstream's time): here the server holds its answer
    until it has seen ``on_sent`` called."""
    called: list[int] = []
    release = asyncio.Event()

    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        await release.wait()
        transport.write(answer_bytes(b"{}"))

    def on_sent() -> None:
        called.append(len(called))
        release.set()

    script = Script(answer)
    async with _upstream(script) as (client, port):
        body = _chunks(b'{"a":', b"1}") if chunked else b'{"a":1}'
        response = await asyncio.wait_for(_post(client, port, body=body, on_sent=on_sent), 5)
        assert await response.read() == b"{}"
        response.release()
    assert called == [0]
    assert script.received[0].body == b'{"a":1}'


async def test_a_call_header_replaces_a_fixed_one_of_any_case() -> None:
    destination = Destination("http://h/x", {"Content-Type": "application/json", "X-Key": "a"})
    merged = destination.headers_with({"content-type": "multipart/form-data; boundary=b"})
    assert merged == {"X-Key": "a", "content-type": "multipart/form-data; boundary=b"}
    assert destination.headers_with({}) == destination.headers
    script = Script(fixed(answer_bytes(b"ok")))
    async with _upstream(script) as (client, port):
        await _fetch(client, port)  # the fixed Content-Type, then a call's own in another case
        assert await (await _post(client, port, headers={"CONTENT-TYPE": "text/plain"})).read() == b"ok"
    assert [r.headers["content-type"] for r in script.received] == ["application/json", "text/plain"]


@pytest.mark.parametrize("bad", [{"X-A": "v\r\nX-Injected: 1"}, {"X-A\n": "v"}, {"X-A": "v\0"}])
async def test_a_header_that_would_break_its_line_is_refused(bad: dict[str, str]) -> None:
    script = Script(fixed(answer_bytes(b"ok")))
    async with _upstream(script) as (client, port):
        with pytest.raises(ValueError, match="Forbidden control character"):
            await _post(client, port, headers=bad)
        assert script.received == []  # nothing of it reached the upstream
        assert await _fetch(client, port) == b"ok"  # and the client goes on serving


async def test_the_path_is_escaped_as_a_url_needs_and_only_http_is_accepted() -> None:
    script = Script(fixed(answer_bytes(b"ok")))
    async with _upstream(script) as (client, port):
        url = f"http://127.0.0.1:{port}/v1/p%2Fq/models/my model:generate?alt=sse&k=a%26b%3Dc%2Bd"
        assert await (await _post(client, port, url=url)).read() == b"ok"
    # yarl's escaping: a space escaped, an escaped slash or query delimiter kept as it came.
    assert script.received[0].path == "/v1/p%2Fq/models/my%20model:generate?alt=sse&k=a%26b%3Dc%2Bd"
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


def _ends_with_its_connection(_request: Received, transport: asyncio.Transport) -> None:
    transport.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nok")  # no length: ends at the close
    transport.close()


def _closes_while_idle(_request: Received, transport: asyncio.Transport) -> None:
    transport.write(answer_bytes(b"ok"))
    asyncio.get_running_loop().call_later(0.02, transport.close)  # its keep-alive ran out


def _stray_bytes_after(request: Received, transport: asyncio.Transport) -> None:
    stray = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"  # not the next call's answer
    transport.write(answer_bytes(b"ok") + (stray if request.connection == 1 else b""))


@pytest.mark.parametrize("answer", [_ends_with_its_connection, _closes_while_idle, _stray_bytes_after],
                         ids=lambda answer: answer.__name__.strip("_"))
async def test_a_connection_that_cannot_serve_again_is_not_reused(
        answer: Callable[[Received, asyncio.Transport], None]) -> None:
    script = Script(answer)
    async with _upstream(script) as (client, port):
        for _ in range(2):
            assert await _fetch(client, port) == b"ok"
            await asyncio.sleep(0.05)
        assert script.connections == 2 and len(script.received) == 2


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_answers_are_decoded(encoding: str) -> None:
    body = b'{"text":"' + b"hello " * 2000 + b'"}'
    wbits = {"gzip": 31, "deflate": 15, "raw-deflate": -15}[encoding]  # raw: deflate without zlib's wrap
    squeeze = zlib.compressobj(wbits=wbits)
    packed = squeeze.compress(body) + squeeze.flush()
    name = encoding.removeprefix("raw-")
    async with _upstream(Script(fixed(answer_bytes(packed, f"Content-Encoding: {name}")))) as (client, port):
        assert await (await _post(client, port)).read() == body


@pytest.mark.parametrize(("packed", "error"), [
    (answer_bytes(b"not gzip at all", "Content-Encoding: gzip"), aiohttp.ClientPayloadError),
    (answer_bytes(b"data", "Content-Encoding: br"), aiohttp.ClientResponseError),  # not asked for
    pytest.param(answer_bytes(gzip.compress(b"x" * 5000)[:-12], "Content-Encoding: gzip"),
                 aiohttp.ClientPayloadError, marks=pytest.mark.xfail(
                     strict=True, reason="aiohttp checks the end of a deflate stream only, not gzip's")),
], ids=["not-gzip", "br", "gzip-cut-short"])
async def test_a_body_that_does_not_decode_whole_is_a_client_error(packed: bytes,
                                                                   error: type[Exception]) -> None:
    async with _upstream(Script(fixed(packed))) as (client, port):
        with pytest.raises(error):
            await (await _post(client, port)).read()


async def test_bytes_that_are_not_http_are_a_client_error() -> None:
    async with _upstream(Script(fixed(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"))) as (client, port):
        with pytest.raises(aiohttp.ClientResponseError):
            await _post(client, port)


async def test_a_cut_answer_gives_what_came_then_fails() -> None:
    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfirst part")
        await asyncio.sleep(0.05)
        transport.abort()

    async with _upstream(Script(answer)) as (client, port):
        response = await _post(client, port)
        assert await response.readany() == b"first part"
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.readany()


async def test_a_silent_upstream_times_out_per_read_and_its_connection_is_closed() -> None:
    async def answer(request: Received, transport: asyncio.Transport) -> None:
        if request.connection > 1:
            transport.write(answer_bytes(b"next"))
            return
        transport.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        for _ in range(3):  # a chunk each 0.06 s keeps an idle_s of 0.1 from firing
            await asyncio.sleep(0.06)
            transport.write(b"1\r\n.\r\n")
        await asyncio.sleep(5)

    script = Script(answer)
    async with _upstream(script) as (client, port):
        response = await _post(client, port, timeouts=_timeouts(idle_s=0.1))
        assert await response.readany() == b"hello"
        assert [await response.readany() for _ in range(3)] == [b"."] * 3
        began = asyncio.get_running_loop().time()
        with pytest.raises(TimeoutError):
            await response.readany()
        assert asyncio.get_running_loop().time() - began < 1
        response.close()  # unfinished: its connection is closed, never given to the next call
        assert await _fetch(client, port) == b"next" and script.connections == 2


async def test_a_head_later_than_the_first_byte_deadline_times_out_and_closes_its_connection() -> None:
    await _head_later_than_first_byte("bytes")


@pytest.mark.parametrize("body", ["pieces", "large"])
async def test_the_first_byte_deadline_counts_from_the_last_piece_of_a_body_written(body: str) -> None:
    await _head_later_than_first_byte(body)


async def _head_later_than_first_byte(body: str) -> None:
    async def answer(request: Received, transport: asyncio.Transport) -> None:
        if request.connection == 1:
            await asyncio.sleep(5)  # the first connection never answers
        transport.write(answer_bytes(b"late enough"))

    sent: bytes | AsyncIterator[bytes] = {"bytes": b"{}", "pieces": _chunks(b"{", b"}"),
                                          "large": b" " * (3 * 1024 * 1024)}[body]
    script = Script(answer)
    async with _upstream(script) as (client, port):
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(TimeoutError):
            await _post(client, port, body=sent, timeouts=_timeouts(connect_s=5, first_byte_s=0.15))
        # The head's deadline is first_byte_s from the request written (a bytes body, one of
        # pieces, a large one sent a piece at a time), not from the call's start plus connect_s.
        # (uvloop's timers have a resolution of 1 ms: the deadline's may fire that much early.)
        assert 0.149 <= loop.time() - began < 1.5
        # Its connection was closed, not kept for the next call, which gets a new one.
        assert await (await _post(client, port)).read() == b"late enough"
        assert script.connections == 2


async def test_total_s_cuts_a_dripping_body() -> None:
    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while not transport.is_closing():  # a byte each 20 ms: never idle, never done
            transport.write(b"1\r\nx\r\n")
            await asyncio.sleep(0.02)

    async with _upstream(Script(answer)) as (client, port):
        loop = asyncio.get_running_loop()
        began = loop.time()
        response = await _post(client, port, timeouts=_timeouts(idle_s=5, total_s=0.3))
        with pytest.raises(TimeoutError):
            await response.read()
        assert 0.299 <= loop.time() - began < 1.5  # a timer may fire up to 1 ms early on uvloop
        response.close()


async def test_a_slow_reader_holds_a_bounded_buffer() -> None:
    piece = b"x" * 65536
    pieces = 200  # 13 MB, written as fast as the socket takes it

    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(pieces):
            transport.write(b"%x\r\n%b\r\n" % (len(piece), piece))
            await asyncio.sleep(0)
        transport.write(b"0\r\n\r\n")

    async with _upstream(Script(answer)) as (client, port):
        response = await _post(client, port)
        await asyncio.sleep(0.2)  # a reader that does not read: the client stops reading too
        total, most = 0, 0
        while data := await response.readany():  # ``readany`` gives all that is buffered
            total += len(data)
            most = max(most, len(data))
            await asyncio.sleep(0.002)
        assert total == pieces * len(piece)
        # aiohttp pauses the socket once its buffer is past twice its 64 KiB read size, checked
        # after each socket read (256 KiB): a few hundred KiB, never the megabytes written.
        assert most <= 1024 * 1024, most


async def test_a_body_of_chunks_goes_chunked_or_with_the_length_it_was_given() -> None:
    script = Script(fixed(answer_bytes(b"ok")))
    async with _upstream(script) as (client, port):
        for headers in ({}, {"Content-Length": "13"}):
            response = await _post(client, port, body=_chunks(b"one,", b"two,", b"three"), headers=headers)
            assert await response.read() == b"ok"
            response.release()
        chunked, sized = script.received
        assert chunked.body == sized.body == b"one,two,three"
        assert chunked.headers["transfer-encoding"] == "chunked" and "content-length" not in chunked.headers
        assert sized.headers["content-length"] == "13" and "transfer-encoding" not in sized.headers


async def test_a_refused_connection_is_a_connector_error() -> None:
    server, port = await serve(Script(fixed(b"")))
    server.close()
    await server.wait_closed()
    async with _started() as client:
        with pytest.raises(aiohttp.ClientConnectorError):
            await _post(client, port)


# The client trusts the CAs its process was started with (aiohttp makes its verifying context
# once, as it is imported): a child process started with SSL_CERT_FILE naming the test CA.
_TRUSTING_CHILD = """
import asyncio, sys
from gateway.settings.config import LimitsConfig, UpstreamTimeouts
from gateway.upstream.client import Destination, UpstreamClient
async def main():
    client = UpstreamClient(LimitsConfig())
    await client.start()
    answer = await client.request("POST", Destination(sys.argv[1], {}), {}, b"{}", UpstreamTimeouts())
    sys.stdout.write((await answer.read()).decode())
    await client.stop()
asyncio.run(main())
"""


async def test_https_checks_the_upstreams_certificate(tmp_path: Path) -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)
    authority.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    script = Script(fixed(answer_bytes(b"secret ok")))
    server, port = await serve(script, tls=server_tls)
    url = f"https://127.0.0.1:{port}/v1/x"
    try:
        async with _started() as stranger:
            with pytest.raises(aiohttp.ClientConnectorCertificateError, match="CERTIFICATE_VERIFY_FAILED"):
                await _post(stranger, port, url=url)  # the system's CAs do not know this one
        assert script.received == []
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _TRUSTING_CHILD, url, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "SSL_CERT_FILE": str(tmp_path / "ca.pem")})
        out, _ = await asyncio.wait_for(child.communicate(), 15)
        assert child.returncode == 0 and out == b"secret ok"
    finally:
        server.close()


# aiohttp warns of any bytes body over 1 MiB; the relay sends its bodies as bytes, as here.
@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
@pytest.mark.parametrize("then_close", [True, False], ids=["then-closes", "stops-reading"])
async def test_an_answer_before_the_whole_body_is_sent_is_not_lost(then_close: bool) -> None:
    connections: list[int] = []
    server = await asyncio.get_running_loop().create_server(
        lambda: EarlyRefusal(then_close, connections), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with _started() as client:
            for _ in range(2):  # the unsent rest of the body leaves the connection unusable
                response = await asyncio.wait_for(_post(client, port, body=b"x" * (64 * 1024 * 1024)), 10)
                assert response.status == 413 and await response.read() == b'{"error":"too large"}'
                response.release()
            assert len(connections) == 2
    finally:
        server.close()


async def test_the_headers_of_an_informational_answer_are_not_the_answers() -> None:
    early = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\nContent-Encoding: gzip\r\n\r\n"
    async with _upstream(Script(fixed(early + answer_bytes(b"plain", "X-Real: 1")))) as (client, port):
        response = await _post(client, port)
        assert response.status == 200 and await response.read() == b"plain"
        assert "link" not in response.headers and response.headers["x-real"] == "1"


async def test_a_post_on_a_connection_closed_as_it_came_is_not_sent_twice() -> None:
    """A keep-alive connection the upstream drops as the next request arrives: the upstream may
    have acted on it, so a POST is not sent again (aiohttp retries idempotent methods only)."""
    def answer(request: Received, transport: asyncio.Transport) -> None:
        if len(script.received) == 2:
            transport.close()
        else:
            transport.write(answer_bytes(b"ok"))

    script = Script(answer)
    async with _upstream(script) as (client, port):
        assert await _fetch(client, port) == b"ok"
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await _post(client, port)
        assert len(script.received) == 2 and script.connections == 1
        assert await _fetch(client, port) == b"ok"  # the next call gets a new connection


async def test_a_new_connection_closed_without_an_answer_is_not_retried() -> None:
    script = Script(lambda _request, transport: transport.close())
    async with _upstream(script) as (client, port):
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await _post(client, port)
        assert len(script.received) == 1


async def test_credentials_in_the_url_become_basic_authorization_unless_configured() -> None:
    plain = Destination("https://user:p%40ss@h/x", {})
    assert plain.headers == {"Authorization": "Basic dXNlcjpwQHNz"}  # user:p@ss
    assert str(plain.url) == "https://h/x"
    configured = Destination("https://user:pw@h/x", {"authorization": "Bearer sk"})
    assert configured.headers == {"authorization": "Bearer sk"}
    script = Script(fixed(answer_bytes(b"ok")))
    async with _upstream(script) as (client, port):
        destination = Destination(f"http://user:p%40ss@127.0.0.1:{port}/x", {})
        response = await client.request("POST", destination, destination.headers, b"{}", _timeouts())
        assert await response.read() == b"ok"
    assert script.received[0].headers["authorization"] == "Basic dXNlcjpwQHNz"


async def test_a_body_over_the_limit_is_refused_without_reading_the_rest() -> None:
    size = 64 * 1024 * 1024
    written: list[int] = []

    async def answer(_request: Received, transport: asyncio.Transport) -> None:
        transport.write(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
        sent, piece = 0, b"x" * 65536
        while sent < size and not transport.is_closing():
            if transport.get_write_buffer_size() > 1024 * 1024:
                await asyncio.sleep(0.001)  # as a server awaiting its writer's drain does
                continue
            transport.write(piece)
            sent += len(piece)
        written.append(sent)

    script = Script(answer)
    async with _upstream(script, LimitsConfig(upstream_body_bytes=1024 * 1024)) as (client, port):
        response = await _post(client, port)
        with pytest.raises(AnswerTooLarge):
            await response.read()
        await asyncio.wait(script.tasks, timeout=2)  # the server sees its connection end
    assert written and written[0] < size // 2, written  # the connection was dropped at the limit


async def test_a_compressed_body_that_inflates_past_the_limit_is_refused_in_bounded_memory() -> None:
    squeeze = zlib.compressobj(1, wbits=31)  # gzip: 256 MiB of zeros in about 250 KiB
    packed = b"".join(squeeze.compress(bytes(1024 * 1024)) for _ in range(256)) + squeeze.flush()
    script = Script(fixed(answer_bytes(packed, "Content-Encoding: gzip")))
    async with _upstream(script, LimitsConfig(upstream_body_bytes=1024 * 1024)) as (client, port):
        response = await _post(client, port)
        with PeakRss() as peak, pytest.raises(AnswerTooLarge):
            await response.read()
    assert peak.growth_bytes < 64 * 1024 * 1024, peak.growth_bytes


@pytest.mark.parametrize("head", [
    "X-Long: " + "a" * 2048,  # one line over the limit
    "\r\n".join(f"X-{n}: v" for n in range(40)),  # more lines than the limit
], ids=["long-line", "many-lines"])
async def test_a_head_over_the_limits_is_a_response_error(head: str) -> None:
    limits = LimitsConfig(upstream_header_bytes=1024, upstream_header_count=32)
    async with _upstream(Script(fixed(answer_bytes(b"ok", head))), limits) as (client, port):
        with pytest.raises(aiohttp.ClientResponseError):
            await _post(client, port)
    within = "\r\n".join(f"X-{n}: {'v' * 900}" for n in range(30))  # under both: accepted
    async with _upstream(Script(fixed(answer_bytes(b"ok", within))), limits) as (client, port):
        assert await (await _post(client, port)).read() == b"ok"


@pytest.mark.parametrize("scenario", [
    test_sends_the_head_and_body_and_reuses_the_connection, test_a_chunked_answer_is_read_as_it_comes,
    test_a_cut_answer_gives_what_came_then_fails, test_a_slow_reader_holds_a_bounded_buffer,
    test_a_refused_connection_is_a_connector_error,
    test_a_silent_upstream_times_out_per_read_and_its_connection_is_closed,
    test_a_head_later_than_the_first_byte_deadline_times_out_and_closes_its_connection,
], ids=lambda scenario: scenario.__name__.removeprefix("test_"))
async def test_on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    """The gateway serves on uvloop, whose transports differ from asyncio's (the tests above run on
    the suite's asyncio loop): the same scenarios, each on a uvloop loop of its own thread."""
    async def bounded() -> None:
        await asyncio.wait_for(scenario(), 15)

    await asyncio.to_thread(uvloop.run, bounded())
