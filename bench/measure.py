"""One measurement: a scenario at one concurrency against one target (direct, floor, gateway or
LiteLLM), with the target's CPU time and peak memory read from /proc around the wrk run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp

from bench import load, procs, wrk
from bench.scenarios import Scenario, headers


@dataclass
class Target:
    name: str
    base: str
    pid: int | None  # None: not measured for CPU (the simulator called directly)
    key: str
    same_format: bool  # True: sent the scenario's direct request (floor, direct)


@dataclass
class Figures:
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_us: float  # per request; 0 when the target is not measured
    errors: int
    requests: int


def request_of(target: Target, scenario: Scenario) -> tuple[str, bytes, dict[str, str]]:
    path, body = scenario.direct_request() if target.same_format else scenario.gateway_request()
    return target.base + path, body, headers(scenario.family, target.key)


def measure(target: Target, scenario: Scenario, connections: int, seconds: float) -> Figures:
    url, body, hdrs = request_of(target, scenario)
    before = procs.cpu_seconds(target.pid) if target.pid else 0.0
    result = wrk.run(url, body, hdrs, connections=connections, seconds=seconds)
    cpu = procs.cpu_seconds(target.pid) - before if target.pid else 0.0
    return Figures(result.rps, result.p50_ms, result.p99_ms, cpu / max(result.requests, 1) * 1e6,
                   result.errors, result.requests)


def measure_fixed(target: Target, scenario: Scenario, connections: int, total: int) -> Figures:
    """Exactly ``total`` requests (the Python load generator), CPU over all of them: for the long
    streams, where a timed wrk run would cut a large share of the work at its end."""
    url, body, hdrs = request_of(target, scenario)
    before = procs.cpu_seconds(target.pid) if target.pid else 0.0
    result = asyncio.run(load.run(url, body, hdrs, concurrency=connections, total=total,
                                  stream=scenario.stream, warmup=False))
    cpu = procs.cpu_seconds(target.pid) - before if target.pid else 0.0
    served = max(len(result.samples), 1)
    return Figures(result.throughput, result.pct(0.5) * 1000, result.pct(0.99) * 1000, cpu / served * 1e6,
                   result.errors, len(result.samples))


def ttft(target: Target, scenario: Scenario, total: int) -> load.Result:
    """Time to first byte of a stream at concurrency 1 (wrk cannot see inside a response)."""
    url, body, hdrs = request_of(target, scenario)
    return asyncio.run(load.run(url, body, hdrs, concurrency=1, total=total, stream=True))


async def _events(url: str, body: bytes, hdrs: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=hdrs) as resp:
        text = await resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {text[:300]!r}")
        return text.count(b"data:")


def check(target: Target, scenario: Scenario) -> int:
    """One request, which must succeed; the SSE events of its answer (0 when not a stream)."""
    return asyncio.run(_events(*request_of(target, scenario)))
