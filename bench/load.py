"""A closed-loop load generator: ``concurrency`` workers send ``total`` requests back to back and
time each one (and, for streams, the first chunk and the gaps between chunks)."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass, field

import aiohttp


@dataclass
class Sample:
    latency: float
    ttft: float | None = None
    chunks: int = 0

    @property
    def tail(self) -> float | None:
        """Time from the first chunk to the end of a stream."""
        return None if self.ttft is None else self.latency - self.ttft


@dataclass
class Result:
    samples: list[Sample] = field(default_factory=list)
    errors: int = 0
    wall: float = 0.0

    @property
    def throughput(self) -> float:
        return len(self.samples) / self.wall if self.wall else 0.0

    def pct(self, q: float, attr: str = "latency") -> float:
        values = sorted(v for s in self.samples if (v := getattr(s, attr)) is not None)
        if not values:
            return 0.0
        return float(values[min(len(values) - 1, int(q * len(values)))])

    def mean(self, attr: str = "latency") -> float:
        values = [v for s in self.samples if (v := getattr(s, attr)) is not None]
        return statistics.fmean(values) if values else 0.0

    @property
    def mean_chunks(self) -> float:
        return statistics.fmean(s.chunks for s in self.samples) if self.samples else 0.0


async def _one(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str],
               stream: bool) -> Sample:
    start = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as response:
        if response.status != 200:
            await response.read()
            raise RuntimeError(f"HTTP {response.status}")
        if not stream:
            await response.read()
            return Sample(time.perf_counter() - start)
        ttft = None
        events = 0
        async for data in response.content.iter_any():
            if ttft is None:
                ttft = time.perf_counter() - start
            events += data.count(b"data:")  # SSE events, however the bytes were chunked
        return Sample(time.perf_counter() - start, ttft, events)


async def run(url: str, body: bytes, headers: dict[str, str], *, concurrency: int, total: int,
              stream: bool, warmup: bool = True) -> Result:
    result = Result()
    remaining = total
    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        # Warm the connection pool and both servers' code paths before timing.
        for _ in range(min(concurrency, 8) if warmup else 0):
            await _one(session, url, body, headers, stream)

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                try:
                    result.samples.append(await _one(session, url, body, headers, stream))
                except (RuntimeError, aiohttp.ClientError):
                    result.errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        result.wall = time.perf_counter() - start
    return result
