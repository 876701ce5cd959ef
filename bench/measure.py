"""One measurement: a scenario at one concurrency against one target (direct, floor, gateway or
LiteLLM), with the target's CPU time and peak memory read from /proc around the wrk run."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import aiohttp

from bench import load, procs, wrk
from bench.scenarios import Scenario, headers

T = TypeVar("T")


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


def median(runs: Sequence[Figures]) -> Figures:
    """Each figure's median over rounds; errors and requests summed."""
    return Figures(statistics.median(r.rps for r in runs), statistics.median(r.p50_ms for r in runs),
                   statistics.median(r.p99_ms for r in runs), statistics.median(r.cpu_us for r in runs),
                   sum(r.errors for r in runs), sum(r.requests for r in runs))


def in_turn(targets: Sequence[T], round_no: int) -> list[tuple[int, T]]:
    """The targets (with their index) in the order of round ``round_no``: every other round in
    reverse, so that no target is always measured right after another one (warmer caches, a CPU
    clock still up)."""
    order = list(enumerate(targets))
    return order if round_no % 2 == 0 else order[::-1]


WARMUP_S = 1.0  # wrk runs whole seconds


def interleaved(targets: Sequence[Target], scenario: Scenario, connections: int, seconds: float,
                rounds: int) -> list[Figures]:
    """Each target measured ``rounds`` times in turn (``in_turn``), and the median of each figure:
    on a machine whose speed drifts (a hypervisor taking CPU time from it for a few seconds), a
    slow spell then lands on one round of one target, not on its figure. Each target is first
    loaded for ``WARMUP_S`` untimed at this concurrency and scenario: what it does once when the
    load grows (more upstream connections, a larger quota slab) is not its cost per request."""
    for target in targets:
        measure(target, scenario, connections, WARMUP_S)
    runs: list[list[Figures]] = [[] for _ in targets]
    for round_no in range(rounds):
        for i, target in in_turn(targets, round_no):
            runs[i].append(measure(target, scenario, connections, seconds))
    return [median(r) for r in runs]


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


def ttft_p50_ms(targets: Sequence[Target], scenario: Scenario, total: int, rounds: int) -> list[float]:
    """Each target's p50 time to first byte (ms): the median of ``rounds`` rounds of
    ``total / rounds`` streams, the targets in turn as in ``interleaved``."""
    runs: list[list[float]] = [[] for _ in targets]
    for round_no in range(rounds):
        for i, target in in_turn(targets, round_no):
            runs[i].append(ttft(target, scenario, max(total // rounds, 1)).pct(0.5, "ttft") * 1000)
    return [statistics.median(r) for r in runs]


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
