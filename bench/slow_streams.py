"""Many slow streams through one worker (issue 32): ``count`` streaming chat calls (2,000) opened at
the same instant against a fresh gateway and, in turn, a fresh floor, each on one worker. The
upstream (bench/replay.py, ``SLOW`` model ids) sends each stream's first byte after 1 s, then a
chunk every 50 ms. The load comes from bench/many_streams.py in ``GENERATORS`` processes of their
own, which record each chunk's arrival.

Figures per relay, over all rounds: the gaps between two chunks of a stream as the client saw
them (p50, p99, largest), the time to the first chunk, CPU per stream (user + system of the
relay's process tree over the waves, divided by the streams served), and peak RSS (``VmHWM``:
each relay is started for this scenario alone, so it is this load's peak, not an earlier one's).

The added inter-chunk p99 is the gateway's p99 gap minus the upstream's pace (50 ms): what the
whole chain (upstream timers, gateway, client, the machine they share) adds to the pace the
upstream keeps. The floor's, taken the same way, is the part a bare relay on this machine adds
too. Not the gateway's p99 minus the floor's: a relay that cannot keep up with 40,000 chunks a
second (the floor is one Python process as well) makes its own gaps long, and any gateway would
then look faster than a drowned floor.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench import measure, procs
from bench.many_streams import Spec, Wave
from bench.measure import Target
from bench.scenarios import SLOW_FIRST_BYTE_S, SLOW_PACE_S, Scenario, slow_stream

# Two processes share the load: one Python client reading 40,000 chunks a second would spend a
# core on it, and its own delays would be most of the gaps it measures.
GENERATORS = 2
_START_DELAY_S = 1.5  # the generators' imports, before the instant they all open their calls


@dataclass
class StreamsFigures:
    target: str
    opened: int
    served: int
    errors: dict[str, int]
    gap_p50_ms: float
    gap_p99_ms: float
    gap_max_ms: float
    first_chunk_p50_ms: float
    first_chunk_p99_ms: float
    in_flight: int  # the most streams between their first and last chunk at one instant
    cpu_ms_per_stream: float  # the relay's
    peak_rss_mb: float
    # Over the waves, how busy the machine was: the relay's, the upstream's and the load
    # generator's CPU seconds against the waves' wall time (cores x wall is all there was).
    relay_cpu_s: float
    upstream_cpu_s: float
    client_cpu_s: float
    wall_s: float
    relay_busiest: float  # the relay's CPU share of one core in its busiest second (1.0: all of one)


@dataclass
class SlowStreams:
    count: int  # streams opened at once, per wave
    tokens: int  # content chunks per stream
    rounds: int  # waves per relay, the relays in turn
    pace_ms: float
    gateway: StreamsFigures
    floor: StreamsFigures

    @property
    def added_gap_p99_ms(self) -> float:
        return self.gateway.gap_p99_ms - self.pace_ms

    @property
    def cpu_ratio(self) -> float:
        floor = self.floor.cpu_ms_per_stream
        return self.gateway.cpu_ms_per_stream / floor if floor else 0.0


@dataclass
class _Seen:
    """What the generators saw of one relay's waves, and what the waves cost."""

    waves: list[Wave] = field(default_factory=list)
    relay_cpu_s: float = 0.0
    upstream_cpu_s: float = 0.0
    wall_s: float = 0.0
    relay_busiest: float = 0.0


def _p99(values: Sequence[float]) -> float:
    if len(values) < 2:
        return sum(values)
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def in_flight(waves: Sequence[Wave]) -> int:
    """The most streams of one wave between their first and last chunk at the same instant."""
    most = 0
    for w in waves:
        # Starts before ends at the same instant: two streams that touch count as overlapping.
        edges = sorted([(start, 0) for start, _ in w.spans] + [(end, 1) for _, end in w.spans])
        now = 0
        for _, is_end in edges:
            now += -1 if is_end else 1
            most = max(most, now)
    return most


def _cpu(pid: int | None) -> float:
    return procs.cpu_seconds(pid) if pid else 0.0


def _busiest_second(pid: int | None, running: Sequence[subprocess.Popen[bytes]], timeout: float) -> float:
    """Waits for ``running`` to end, sampling ``pid``'s CPU time: its largest share of a core over
    any second of the wait (one worker is one process: 1.0 is as fast as it can go)."""
    samples: list[tuple[float, float]] = []
    give_up = time.monotonic() + timeout
    while any(proc.poll() is None for proc in running):
        if time.monotonic() > give_up:
            for proc in running:
                proc.kill()
            raise RuntimeError("the load generator outlived its deadline")
        samples.append((time.monotonic(), _cpu(pid)))
        time.sleep(0.25)
    busiest = 0.0
    for i, (then, cpu_then) in enumerate(samples):
        later = next(((t, c) for t, c in samples[i + 1:] if t - then >= 1.0), None)
        if later is not None:
            busiest = max(busiest, (later[1] - cpu_then) / (later[0] - then))
    return busiest


def wave(target: Target, scenario: Scenario, count: int, deadline: float, directory: Path, log: Path,
         seen: _Seen, upstream_pid: int | None = None) -> None:
    """``count`` calls opened at once by the generators, each given up after ``deadline``
    seconds; what they saw and what it cost added to ``seen``."""
    url, body, headers = measure.request_of(target, scenario)
    start_at = time.time() + _START_DELAY_S
    shares = [count // GENERATORS + (1 if i < count % GENERATORS else 0) for i in range(GENERATORS)]
    relay, upstream = _cpu(target.pid), _cpu(upstream_pid)
    running: list[tuple[subprocess.Popen[bytes], Path]] = []
    with log.open("ab") as output:
        for i, share in enumerate(s for s in shares if s):
            spec, out = directory / f"streams-{i}.json", directory / f"seen-{i}.json"
            spec.write_bytes(msgspec.json.encode(Spec(url, body, headers, share, start_at, deadline)))
            command = [sys.executable, "-m", "bench.many_streams", str(spec), str(out)]
            running.append((subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT,
                                             cwd=procs.ROOT), out))
        seen.relay_busiest = max(seen.relay_busiest, _busiest_second(target.pid, [p for p, _ in running],
                                                                     _START_DELAY_S + deadline + 30))
    seen.wall_s += time.time() - start_at
    seen.relay_cpu_s += _cpu(target.pid) - relay
    seen.upstream_cpu_s += _cpu(upstream_pid) - upstream
    for proc, _ in running:
        if proc.returncode != 0:
            raise RuntimeError(f"the load generator exited with {proc.returncode} (see the process log)")
    seen.waves.append(_merged([msgspec.json.decode(out.read_bytes(), type=Wave) for _, out in running]))


def _merged(parts: Sequence[Wave]) -> Wave:
    out = Wave(errors={}, first_chunk_ms=[], gaps_ms=[], spans=[])
    for part in parts:
        out.served += part.served
        out.first_chunk_ms += part.first_chunk_ms
        out.gaps_ms += part.gaps_ms
        out.spans += part.spans
        out.cpu_s += part.cpu_s
        for kind, n in part.errors.items():
            out.errors[kind] = out.errors.get(kind, 0) + n
    return out


def _figures(name: str, seen: _Seen, opened: int, peak_rss_mb: float) -> StreamsFigures:
    every = _merged(seen.waves)
    gaps, firsts = every.gaps_ms, every.first_chunk_ms
    return StreamsFigures(
        name, opened, every.served, every.errors, statistics.median(gaps) if gaps else 0.0, _p99(gaps),
        max(gaps, default=0.0), statistics.median(firsts) if firsts else 0.0, _p99(firsts),
        in_flight(seen.waves), seen.relay_cpu_s / max(every.served, 1) * 1000, peak_rss_mb,
        seen.relay_cpu_s, seen.upstream_cpu_s, every.cpu_s, seen.wall_s, seen.relay_busiest)


def run(tmp: Path, upstream_port: int, server: str, admin_key: str, make_key: Callable[[str], str],
        log: Path, *, count: int, tokens: int, rounds: int, upstream_pid: int | None = None) -> SlowStreams:
    """The gateway and the floor, each started for this alone, ``rounds`` waves each in turn."""
    scenario = slow_stream(tokens)
    deadline = 10 * (SLOW_FIRST_BYTE_S + tokens * SLOW_PACE_S) + 30  # a stuck wave ends, reported
    procs.raise_fd_limit()  # inherited by the relays and the generators
    gw_port, floor_port = procs.free_port(), procs.free_port()
    config = procs.write_config(tmp, "streams", gw_port, upstream_port, admin_key)
    started = [procs.start_gateway(config, gw_port, server, log)]
    try:
        started.append(procs.start_floor(server, floor_port, f"http://127.0.0.1:{upstream_port}", log))
        gateway = Target("gateway", f"http://127.0.0.1:{gw_port}", started[0].pid,
                         make_key(f"http://127.0.0.1:{gw_port}"), False)
        floor = Target("floor", f"http://127.0.0.1:{floor_port}", started[1].pid, "none", True)
        targets = (gateway, floor)
        for target in targets:  # the upstream records each relay's request once, not 2,000 times
            measure.check(target, scenario)
        seen = (_Seen(), _Seen())
        for round_no in range(rounds):
            for i, target in measure.in_turn(targets, round_no):
                wave(target, scenario, count, deadline, tmp, log, seen[i], upstream_pid)
        gw, fl = (_figures(t.name, seen[i], count * rounds, procs.rss_mb(started[i].pid))
                  for i, t in enumerate(targets))
        return SlowStreams(count, tokens, rounds, SLOW_PACE_S * 1000, gw, fl)
    finally:
        for proc in reversed(started):
            procs.stop(proc)
