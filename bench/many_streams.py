"""One process of the slow streams' load generator (bench/slow_streams.py): ``count`` streaming
calls opened at the same instant against a relay on the loopback, each chunk's arrival recorded.

A chunk is one read of the response body (one or more SSE events: with the upstream pacing them
50 ms apart, one). Per stream it keeps the time from sending the request to the first chunk and
the gaps between one chunk and the next; a stream counts as served when its last event is
``data: [DONE]`` and its status 200. Bounded: at most ``MAX_STREAMS`` calls, every call given up
at the deadline, loopback addresses only.

``python -m bench.many_streams SPEC_JSON OUT_JSON``: reads a ``Spec``, writes a ``Wave``.
"""

from __future__ import annotations

import asyncio
import itertools
import resource
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import msgspec

from bench.procs import raise_fd_limit

MAX_STREAMS = 5000
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_END = b"data: [DONE]"


class Spec(msgspec.Struct, frozen=True):
    url: str
    body: bytes
    headers: dict[str, str]
    count: int
    start_at: float  # wall clock (time.time()): all the generator's processes open their calls then
    deadline_s: float  # from start_at: any call still open is given up


class Wave(msgspec.Struct):
    served: int = 0
    errors: dict[str, int] = {}
    first_chunk_ms: list[float] = []  # per served stream
    gaps_ms: list[float] = []  # every gap between two chunks of a served stream
    # Per served stream, its first and last chunk's arrival (time.monotonic(), one clock for all
    # the generator's processes): how many streams were in flight at once.
    spans: list[tuple[float, float]] = []
    cpu_s: float = 0.0  # this process's own user + system time: what the load itself cost


class StreamFailed(Exception):
    pass


def _check(spec: Spec) -> None:
    host = urlsplit(spec.url).hostname or ""
    if host not in _LOOPBACK:
        raise SystemExit(f"refusing to load {host!r}: loopback only")
    if not 0 < spec.count <= MAX_STREAMS:
        raise SystemExit(f"count {spec.count} out of 1..{MAX_STREAMS}")


async def _stream(session: aiohttp.ClientSession, spec: Spec) -> tuple[float, list[float]]:
    """One call: seconds to its first chunk, and each chunk's arrival (time.monotonic())."""
    sent = time.monotonic()
    arrivals: list[float] = []
    tail = b""
    async with session.post(spec.url, data=spec.body, headers=spec.headers) as resp:
        if resp.status != 200:
            await resp.read()
            raise StreamFailed(f"HTTP {resp.status}")
        async for data in resp.content.iter_any():
            arrivals.append(time.monotonic())
            tail = (tail + data)[-64:]
    if not arrivals or _END not in tail:
        raise StreamFailed("cut")
    return arrivals[0] - sent, arrivals


async def wave(spec: Spec) -> Wave:
    out = Wave(errors={}, first_chunk_ms=[], gaps_ms=[], spans=[])
    # No pool limit: every call has a connection of its own from the start, as 2,000 clients would.
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=spec.deadline_s)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.sleep(max(spec.start_at - time.time(), 0.0))
        results = await asyncio.gather(*(_stream(session, spec) for _ in range(spec.count)),
                                       return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            kind = str(result) if isinstance(result, StreamFailed) else type(result).__name__
            out.errors[kind] = out.errors.get(kind, 0) + 1
            continue
        first, arrivals = result
        out.served += 1
        out.first_chunk_ms.append(round(first * 1000, 3))
        out.gaps_ms.extend(round((b - a) * 1000, 3) for a, b in itertools.pairwise(arrivals))
        out.spans.append((arrivals[0], arrivals[-1]))
    return out


def main() -> int:
    spec = msgspec.json.decode(Path(sys.argv[1]).read_bytes(), type=Spec)
    _check(spec)
    raise_fd_limit()
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(wave(spec))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result.cpu_s = usage.ru_utime + usage.ru_stime
    # A file, not stdout: the event loop leaves the inherited pipe non-blocking, and a write of more
    # than the pipe holds would then be cut short at exit.
    Path(sys.argv[2]).write_bytes(msgspec.json.encode(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
