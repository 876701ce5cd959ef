"""The bench's upstream: the simulator's answers, each recorded once and then replayed from memory.

The simulator builds every answer afresh (parsing the request, generating text, counting tokens):
about 0.2 ms of CPU a call on this machine, as much as the gateway's whole cost. At concurrency 1
that time sits inside every round trip the bench measures, and the ratios of throughput between
relays (gateway, floor, LiteLLM) then say more about the simulator than about them. This server
stands in front of it: the first time it sees a request (method, target, body) it forwards it to
the simulator, keeps the answer, and from then on answers the same request with the same bytes at
once. A stream is replayed as the simulator sent it: one write per SSE event, back to back when the
simulator had no token delay, with the pauses it was asked for when it had one (``tok<MS>`` in the
model id, which the bench's time-to-first-byte streams use), and paused while the reader is behind.
A request that asked the simulator to wait before its first byte (``ttft<MS>`` in the model id: the
bench's slow streams) waits as long before each replay of its answer. Both waits are replayed as
asked, not as the simulator's timers happened to fire while recording: two relays' requests are
recorded apart, and their answers must still come at the same pace, to the millisecond.

``python -m bench.replay PORT SIMULATOR_BASE [CERT_CHAIN_PEM KEY_PEM]`` (with the PEM files: over
TLS, the bench's HTTPS upstream); ``GET /replay/stats`` tells how many answers were
recorded and replayed (a relay whose upstream request changed from call to call would show one
recording per call).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import sys
import time
from dataclasses import dataclass
from typing import cast

import aiohttp
import httptools
import orjson

from gateway.wire.sse import complete_end, split_events

_SKIP_HEADERS = frozenset({b"host", b"content-length", b"connection", b"accept-encoding",
                           b"transfer-encoding", b"keep-alive"})


# A pause between two events of a recorded stream shorter than this is the simulator's own work,
# not a pace it was asked for (``tok<MS>`` in the model id): replayed back to back.
MIN_GAP_S = 0.0003
# The simulator's pacing options in a model id (the target of a v1beta call, the body of the
# others): ``ttft<MS>`` before the first byte, ``tok<MS>`` between two tokens.
_PACE_OPTION = re.compile(rb"-(ttft|tok)(\d+)")


@dataclass
class Answer:
    first: bytes  # the head, and the whole body unless it is a stream
    frames: list[bytes]  # a stream's body: one chunk frame per SSE event, then the last chunk
    gaps: list[float]  # before each frame, the pause asked for (0: none recorded, under MIN_GAP_S)
    wait: float = 0.0  # before the head: the first-byte wait the request asked for


def _at_asked_pace(answer: Answer, target: bytes, body: bytes) -> Answer:
    """``answer`` with the waits its request asked the simulator for in place of the recorded ones."""
    asked = {m.group(1): int(m.group(2)) / 1000
             for part in (target, body) for m in _PACE_OPTION.finditer(part)}
    if b"tok" in asked:
        answer.gaps = [asked[b"tok"] if gap else 0.0 for gap in answer.gaps]
    answer.wait = asked.get(b"ttft", 0.0)
    return answer


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: int, content_type: str, fields: str) -> bytes:
    reason = "OK" if status == 200 else "Answer"
    return f"HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\n{fields}\r\n".encode()


def _whole(status: int, content_type: str, body: bytes) -> Answer:
    return Answer(_head(status, content_type, f"content-length: {len(body)}\r\n") + body, [], [])


async def _recorded(resp: aiohttp.ClientResponse) -> Answer:
    """``resp``'s answer; a stream's events each with the pause before it as it arrived."""
    content_type = resp.headers.get("content-type", "application/json")
    if not content_type.startswith("text/event-stream"):
        return _whole(resp.status, content_type, await resp.read())
    frames: list[bytes] = []
    gaps: list[float] = []
    pending = b""
    last = time.perf_counter()
    async for chunk in resp.content.iter_any():
        pending += chunk
        end = complete_end(pending)
        if not end:
            continue
        now = time.perf_counter()
        # The pause goes before the first event that came after it (none before the first event).
        gap = now - last if frames and now - last >= MIN_GAP_S else 0.0
        for event in split_events(pending[:end]):
            frames.append(_chunk(event))
            gaps.append(gap)
            gap = 0.0
        pending, last = pending[end:], now
    if pending:
        frames.append(_chunk(pending))
        gaps.append(0.0)
    head = _head(resp.status, content_type, "cache-control: no-cache\r\ntransfer-encoding: chunked\r\n")
    return Answer(head, [*frames, b"0\r\n\r\n"], [*gaps, 0.0])


class Recorder:
    def __init__(self, simulator: str) -> None:
        self.simulator = simulator
        self.answers: dict[tuple[bytes, bytes, bytes], Answer] = {}
        self.recorded = 0
        self.replayed = 0
        self._session: aiohttp.ClientSession | None = None

    async def answer(self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]],
                     body: bytes) -> Answer:
        if target == b"/replay/stats":
            stats = orjson.dumps({"recorded": self.recorded, "replayed": self.replayed})
            return _whole(200, "application/json", stats)
        key = (method, target, body)
        found = self.answers.get(key)
        if found is not None:
            self.replayed += 1
            if found.wait:
                await asyncio.sleep(found.wait)
            return found
        if self._session is None:
            self._session = aiohttp.ClientSession(auto_decompress=True)
        forwarded = {k.decode(): v.decode() for k, v in headers if k.lower() not in _SKIP_HEADERS}
        async with self._session.request(method.decode(), self.simulator + target.decode(), data=body,
                                         headers=forwarded) as resp:
            answer = _at_asked_pace(await _recorded(resp), target, body)
        if resp.status < 300:  # an error is passed on each time, never kept
            self.answers[key] = answer
            self.recorded += 1
        return answer

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class ReplayProtocol(asyncio.Protocol):
    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._target = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._pending: asyncio.Queue[tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes]] = asyncio.Queue()
        self._writable = asyncio.Event()
        self._writable.set()
        self._task: asyncio.Task[None] | None = None
        self._idle = True  # the serving task waits for a request: nothing of an answer is pending

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self._task = asyncio.get_running_loop().create_task(self._serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._writable.set()
        if self._task is not None:
            self._task.cancel()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._transport is not None:
                self._transport.close()

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._target, self._headers, self._body = b"", [], []

    def on_url(self, url: bytes) -> None:
        self._target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        request = (self._parser.get_method(), self._target, self._headers, b"".join(self._body))
        if self._idle and self._pending.empty() and self._transport is not None:
            # A recorded whole answer goes out at once, in this callback: no hop through the
            # serving task (a task step and a queue): 48 -> 39 us of CPU a call at concurrency 1.
            found = self._recorder.answers.get((request[0], request[1], request[3]))
            if found is not None and not found.frames and not found.wait:
                self._recorder.replayed += 1
                self._transport.write(found.first)
                return
        self._pending.put_nowait(request)

    async def _serve(self) -> None:
        while True:
            self._idle = True
            request = await self._pending.get()
            self._idle = False
            answer = await self._recorder.answer(*request)
            if self._transport is None:
                return
            self._transport.write(answer.first)
            for frame, gap in zip(answer.frames, answer.gaps, strict=True):
                if gap:
                    await asyncio.sleep(gap)
                    if self._transport is None:
                        return
                if not self._writable.is_set():
                    await self._writable.wait()
                    if self._transport is None:
                        return
                self._transport.write(frame)


# Room for the bench's 2,000 streams opened at once (bench/slow_streams.py): each relay opens as many
# upstream connections in the same instant, and a full accept queue costs a SYN retry (a second).
BACKLOG = 4096


async def start(port: int, simulator: str,
                tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, Recorder]:
    """The replaying front listening on ``port`` (0: any free one) of 127.0.0.1; over TLS with
    ``tls`` (the server's certificate loaded)."""
    recorder = Recorder(simulator.rstrip("/"))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ReplayProtocol(recorder), "127.0.0.1", port,
                                      backlog=BACKLOG, ssl=tls)
    return server, recorder


async def _serve(port: int, simulator: str, tls: ssl.SSLContext | None) -> None:
    server, recorder = await start(port, simulator, tls)
    try:
        async with server:
            await server.serve_forever()
    finally:
        await recorder.close()


if __name__ == "__main__":
    import uvloop

    from bench.procs import raise_fd_limit
    from bench.tls import server_context

    raise_fd_limit()
    tls_files = sys.argv[3:5]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve(int(sys.argv[1]), sys.argv[2], server_context(*tls_files) if tls_files else None))
    sys.exit(0)
