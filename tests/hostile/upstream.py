"""A scripted hostile upstream, and what a hostile test measures around an attack.

``HostileUpstream`` is a raw asyncio TCP server on 127.0.0.1 (not aiohttp.web: it must be free to
answer malformed HTTP): each accepted connection is handed to the test's ``Handler``, which reads
the gateway's requests (parsed by h11, the server side of HTTP/1.1 done right) and writes whatever
bytes it likes, at the pace it likes, through a ``Connection``. ``tls=`` serves the same over TLS
(``TestCA`` issues the certificate, for the right host name or a wrong one).

Around an attack: ``HealthzSampler`` (the gateway's ``/healthz`` latency, sampled concurrently:
an event loop stalled by the attack shows there), ``PeakRss`` (this process's resident memory at
its peak during the attack: the embedded gateway runs in the test process), and ``log_faults``
(tracebacks and asyncio's transport errors among captured log records).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import ssl
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path

import aiohttp
import h11
import msgspec
import trustme

from bench import upstream_reads

MIB = 1024 * 1024
CHUNK = 64 * 1024  # what one write puts on the wire before waiting for the peer to take it


class Received(msgspec.Struct, frozen=True):
    """One request as the hostile upstream read it."""

    method: str
    target: str
    headers: dict[str, str]  # names in lower case; a repeated name keeps its last value
    body: bytes


class Connection:
    """One accepted connection: read requests, write raw bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 log: list[Received]) -> None:
        self._reader = reader
        self._writer = writer
        self._log = log
        self._parser = h11.Connection(h11.SERVER)

    async def request(self) -> Received | None:
        """The next request on this connection (also appended to the server's ``received``);
        None when the peer closed or sent something h11 refuses."""
        if self._parser.their_state is h11.DONE:
            # The previous request was answered by hand, behind h11's back: a fresh parser takes
            # over what had already arrived after it.
            left, _ = self._parser.trailing_data
            self._parser = h11.Connection(h11.SERVER)
            if left:  # (empty bytes would tell h11 the peer closed)
                self._parser.receive_data(left)
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = self._parser.next_event()
            except h11.RemoteProtocolError:
                return None
            if event is h11.NEED_DATA:
                data = await self._reader.read(CHUNK)
                self._parser.receive_data(data)
                if not data and head is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                received = Received(head.method.decode(), head.target.decode(),
                                    {k.decode().lower(): v.decode("latin-1") for k, v in head.headers},
                                    bytes(body))
                self._log.append(received)
                return received
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def send(self, *chunks: bytes, pace_s: float = 0.0) -> bool:
        """Write ``chunks`` in order, each cut into ``CHUNK``-sized writes that wait for the peer
        (so a 50 MB answer never sits whole in this process), ``pace_s`` apart; False as soon as
        the peer is gone."""
        try:
            for chunk in chunks:
                for start in range(0, len(chunk), CHUNK):
                    self._writer.write(chunk[start:start + CHUNK])
                    await self._writer.drain()
                if pace_s:
                    await asyncio.sleep(pace_s)
        except (ConnectionError, OSError):
            return False
        return not self._writer.is_closing()

    async def drip(self, data: bytes, every_s: float) -> bool:
        """``data`` one byte at a time, ``every_s`` apart, until it ends or the peer leaves."""
        for i in range(len(data)):
            if not await self.send(data[i:i + 1], pace_s=every_s):
                return False
        return True

    async def closed_by_peer(self, within_s: float) -> bool:
        """True when the peer closes (or resets) the connection within ``within_s``."""
        try:
            async with asyncio.timeout(within_s):
                while await self._reader.read(CHUNK):
                    pass
        except TimeoutError:
            return False
        except (ConnectionError, OSError):
            pass
        return True

    def close(self) -> None:
        self._writer.close()

    def abort(self) -> None:
        """A reset instead of an orderly close."""
        self._writer.transport.abort()


Handler = Callable[[Connection], Awaitable[None]]


def answer_once(*chunks: bytes, pace_s: float = 0.0) -> Handler:
    """A handler that reads each connection's first request, writes ``chunks`` and closes."""

    async def handle(conn: Connection) -> None:
        if await conn.request() is not None:
            await conn.send(*chunks, pace_s=pace_s)

    return handle


gzip_bomb = functools.cache(upstream_reads.gzip_bomb)  # about 290 KB inflating to 300 MB of JSON


class HostileUpstream:
    """The server; ``async with HostileUpstream(handler) as up`` serves at ``up.base_url``."""

    def __init__(self, handler: Handler, *, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1",
                 port: int = 0, backlog: int = 100) -> None:
        self._handler = handler
        self._tls = tls
        self._host = host
        self._port = port
        self._backlog = backlog
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.received: list[Received] = []
        self.connections = 0

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self._host}:{self.port}"

    async def __aenter__(self) -> HostileUpstream:
        self._server = await asyncio.start_server(self._accept, self._host, self._port, ssl=self._tls,
                                                  backlog=self._backlog, limit=CHUNK)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handler(Connection(reader, writer, self.received))
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            pass  # the gateway hung up on us: the point of most scripts
        except asyncio.CancelledError:
            # Cancelled by ``__aexit__`` only. Ending normally: asyncio's own callback on this task
            # calls ``task.exception()``, which on a cancelled task raises and logs an error.
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


class TestCA:
    """A throwaway certificate authority (trustme): its PEM for the gateway to trust
    (``SSL_CERT_FILE``) and server contexts whose certificate names any host."""

    __test__ = False  # not a test class, whatever its name says

    def __init__(self, directory: Path) -> None:
        self._ca = trustme.CA()
        self.pem = directory / "hostile-ca.pem"
        self._ca.cert_pem.write_to_path(str(self.pem))

    def server_context(self, *hostnames: str) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ca.issue_cert(*hostnames).configure_cert(context)
        return context


# --- what an attack does to the gateway -------------------------------------------------------------

def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class PeakRss:
    """The growth of this process's peak resident memory over a block: the kernel's high-water
    mark (VmHWM) is reset at the start (``/proc/self/clear_refs``), so a 300 MB buffer held for a
    moment and freed at once is seen too."""

    def __enter__(self) -> PeakRss:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        self.start_kib = _status_kib("VmRSS")
        self.growth_bytes = 0
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.growth_bytes = (_status_kib("VmHWM") - self.start_kib) * 1024


async def _healthz(http: aiohttp.ClientSession, base_url: str) -> None:
    async with http.get(base_url + "/healthz") as resp:
        await resp.read()
        assert resp.status == 200, resp.status


def p99(samples: Iterable[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


class HealthzSampler:
    """``/healthz`` asked every ``every_s`` for the duration of the block, one call at a time.

    A sample runs from when the probe was due, not from when it was sent: an event loop stalled
    between two probes delays the next one's start, and a load balancer's probe would wait for
    that too. With ``in_process`` (the gateway runs in this process) a sample is the smaller of
    that wall time and the CPU time the event loop's thread spent meanwhile: on a shared machine
    the wall time also holds other processes' turns on the cores, which no attack on the gateway
    causes, while a stalled event loop spends its stall on its own thread's CPU. (Not the whole
    process's: a body decoded in the body-work thread, as it should be, keeps a core busy without
    delaying the loop, and counted it made a loaded machine look like a stall. A thread holding
    the GIL for long is what ``tests/stress/fairness`` measures, by wall time, from outside.)"""

    def __init__(self, http: aiohttp.ClientSession, base_url: str, *, in_process: bool = True,
                 every_s: float = 0.02) -> None:
        self._http = http
        self._base_url = base_url
        self._in_process = in_process
        self._every_s = every_s
        self.samples: list[float] = []

    async def _probe(self, due: float, cpu_since: float) -> None:
        await _healthz(self._http, self._base_url)
        waited = time.monotonic() - due
        if self._in_process:
            waited = min(waited, time.thread_time() - cpu_since)
        self.samples.append(waited)

    async def _run(self) -> None:
        due = time.monotonic()
        while True:
            cpu_since = time.thread_time()
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            await self._probe(due, cpu_since)
            due = max(due + self._every_s, time.monotonic())  # a slow probe is not followed by a burst

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[HealthzSampler]:
        # In process, the heap is frozen while sampling, as a serving process freezes what it built
        # at start (``gateway.runtime.tuning``): this one also holds three SDKs and the suite's
        # objects, and one full collection of them (350-400 ms on a loaded machine, about 9 per
        # worker over tests/hostile) read as the gateway's stall.
        if self._in_process:
            gc.freeze()
        task = asyncio.create_task(self._run())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if self._in_process:
                gc.unfreeze()
        if not self.samples:  # the attack ended before a first sample: take one now
            await self._probe(time.monotonic(), time.thread_time())

    async def idle_p99(self, seconds: float = 0.3) -> float:
        """The p99 of the samples of ``seconds`` without an attack (then forgotten)."""
        async with self.running():
            await asyncio.sleep(seconds)
        found = self.p99
        self.samples = []
        return found

    @property
    def p99(self) -> float:
        return p99(self.samples) if self.samples else 0.0

    def stats(self) -> str:
        return f"{len(self.samples)} samples, median {statistics.median(self.samples) * 1000:.1f} ms, " \
               f"p99 {self.p99 * 1000:.1f} ms"


FAULT_TEXT = ("Traceback", "Fatal error on transport", "Task exception was never retrieved",
              "Exception in callback", "was never awaited")


def log_faults(records: Iterable[logging.LogRecord]) -> list[str]:
    """The captured records that show a fault of the code rather than of the upstream: any record
    carrying an exception, or text of a traceback or of asyncio's own error reports."""
    faults = []
    for record in records:
        text = record.getMessage()
        if record.exc_info or record.exc_text or any(mark in text for mark in FAULT_TEXT):
            faults.append(f"{record.name} {record.levelname}: {text[:300]}")
    return faults
