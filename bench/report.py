"""The results of one run as Markdown (``bench/results/latest.md``).

Figures per scenario and concurrency, for the gateway and, in brackets, as a ratio to the floor:
throughput (requests/s), p50 and p99 latency of the whole response (ms), added p50 over calling the
upstream directly (ms; the floor's own in the next column), CPU per request (us, user + system of
the server's process tree from /proc, divided by the requests served), and for streams CPU per
relayed chunk (CPU per request divided by the SSE events of one answer). Then time to first byte
of streams at concurrency 1, peak RSS, the scale check, LiteLLM when asked for, the HTTPS upstream
and the 2,000 slow streams (issue 32), and the issues' targets checked against these figures.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field

from bench import procs
from bench.measure import Figures
from bench.scenarios import Scenario
from bench.slow_streams import SlowStreams, StreamsFigures


@dataclass
class Row:
    scenario: Scenario
    conc: int
    chunks: int
    direct: Figures
    floor: Figures
    gateway: Figures


@dataclass
class Run:
    server: str
    quick: bool
    seconds: float
    rounds: int
    started: float
    rows: list[Row] = field(default_factory=list)
    ttft: dict[str, tuple[float, float, float]] = field(default_factory=dict)  # direct, floor, gateway
    long_rss: dict[str, tuple[float, float]] = field(default_factory=dict)  # VmRSS before, after
    peak_rss: dict[str, float] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    # scenario, concurrency, then the gateway's, the floor's and LiteLLM's figures
    litellm: list[tuple[str, int, Figures, Figures, Figures]] = field(default_factory=list)
    https: list[Row] = field(default_factory=list)  # same-format chat, the upstream over TLS
    slow: SlowStreams | None = None
    load_start: float = field(default_factory=lambda: os.getloadavg()[0])  # others' work skews it all
    stolen_start: tuple[float, float] = field(default_factory=procs.cpu_stolen)


def _stolen(run: Run) -> str:
    steal, total = (now - then for now, then in zip(procs.cpu_stolen(), run.stolen_start, strict=True))
    return (f"CPU time taken by the hypervisor (steal) during the run: {steal:.0f} s, "
            f"{100 * steal / total if total else 0:.1f}% of the cores' time.")


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def console_line(row: Row) -> str:
    g, f = row.gateway, row.floor
    return (f"{row.scenario.name:<40} c={row.conc:<3} rps {g.rps:7.0f} (floor {f.rps:7.0f})  "
            f"p50 {g.p50_ms:7.2f} ms (floor {f.p50_ms:7.2f})  cpu {g.cpu_us:7.0f} us (floor {f.cpu_us:6.0f})"
            f"{'  errors ' + str(g.errors + f.errors + row.direct.errors) if g.errors + f.errors else ''}")


def slow_line(slow: SlowStreams) -> str:
    g, f = slow.gateway, slow.floor
    return (f"{slow.count} slow streams: gap p99 {g.gap_p99_ms:.1f} ms (floor {f.gap_p99_ms:.1f}), "
            f"cpu {g.cpu_ms_per_stream:.2f} ms/stream (floor {f.cpu_ms_per_stream:.2f}), "
            f"RSS {g.peak_rss_mb:.0f} MB (floor {f.peak_rss_mb:.0f}), served {g.served}/{g.opened} "
            f"(floor {f.served}/{f.opened})")


def _table(run: Run) -> list[str]:
    out = ["| scenario | c | rps (x floor) | p50 ms (x) | p99 ms (x) | added p50 ms | floor added | "
           "CPU us/req (x floor) | CPU us/chunk (x) | direct rps | floor rps | errors |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in run.rows:
        g, f, d = r.gateway, r.floor, r.direct
        chunk = (f"{g.cpu_us / r.chunks:.1f} ({_ratio(g.cpu_us, f.cpu_us)})" if r.chunks else "")
        out.append(
            f"| {r.scenario.name} | {r.conc} | {g.rps:.0f} ({_ratio(g.rps, f.rps)}) | {g.p50_ms:.2f} "
            f"({_ratio(g.p50_ms, f.p50_ms)}) | {g.p99_ms:.2f} ({_ratio(g.p99_ms, f.p99_ms)}) | "
            f"{g.p50_ms - d.p50_ms:.2f} | {f.p50_ms - d.p50_ms:.2f} | "
            f"{g.cpu_us:.0f} ({_ratio(g.cpu_us, f.cpu_us)}) | {chunk} | {d.rps:.0f} | {f.rps:.0f} | "
            f"{g.errors + f.errors + d.errors} |")
    return out


def _find(run: Run, name: str, conc: int) -> Row | None:
    return next((r for r in run.rows if r.scenario.name == name and r.conc == conc), None)


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def targets(run: Run) -> list[str]:
    out: list[str] = []
    chat1, chat16 = _find(run, "chat", 1), _find(run, "chat", 16)
    if chat1 and chat16:
        ratio = chat16.gateway.cpu_us / chat16.floor.cpu_us
        out.append(f"- same-format chat CPU/request at c=16: {chat16.gateway.cpu_us:.0f} us vs floor "
                   f"{chat16.floor.cpu_us:.0f} us = {ratio:.2f}x (target <= 1.3x): {_verdict(ratio <= 1.3)}")
        extra = (chat1.gateway.p50_ms - chat1.direct.p50_ms) - (chat1.floor.p50_ms - chat1.direct.p50_ms)
        added = chat1.gateway.p50_ms - chat1.direct.p50_ms
        out.append(f"- same-format chat added p50 at c=1: gateway {added:.2f} ms, "
                   f"floor {chat1.floor.p50_ms - chat1.direct.p50_ms:.2f} ms, difference {extra:.2f} ms "
                   f"(target <= 0.3 ms): {_verdict(extra <= 0.3)}")
    if "chat stream" in run.ttft:
        d, _, g = run.ttft["chat stream"]
        out.append(f"- streaming added time to first byte at c=1: {g - d:.2f} ms (target < 1 ms): "
                   f"{_verdict(g - d < 1)}")
    for kind, limit in (("same", 15.0), ("translated", 40.0)):
        row = next((r for r in run.rows if r.scenario.kind == "long" and r.conc == 1
                    and (r.scenario.name.startswith("chat")) == (kind == "same")), None)
        if row and row.chunks:
            per = row.gateway.cpu_us / row.chunks
            out.append(f"- CPU per relayed chunk, {kind} ({row.scenario.name}, c=1): {per:.1f} us "
                       f"(target < {limit:.0f} us): {_verdict(per < limit)}")
    if chat16:
        for name in ("messages on chat", "v1beta on chat", "chat on messages"):
            row = _find(run, name, 16)
            if row:
                ratio = row.gateway.cpu_us / chat16.gateway.cpu_us
                out.append(f"- {name} CPU/request at c=16: {row.gateway.cpu_us:.0f} us = {ratio:.2f}x "
                           f"same-format (target <= 1.5x): {_verdict(ratio <= 1.5)}")
    if run.peak_rss:
        rss = run.peak_rss["gateway"]
        out.append(f"- peak RSS of a gateway worker: {rss:.0f} MB (target < 150 MB): {_verdict(rss < 150)}")
    for name, (before, after) in run.long_rss.items():
        out.append(f"- {name}: worker RSS {before:.0f} MB before, {after:.0f} MB after the streams at c=1 "
                   f"(constant memory: {_verdict(after - before < 10)})")
    if run.scale:
        small, large = run.scale["small"], run.scale["large"]
        out.append(f"- 100,000 keys + 1,000 models: {large:.0f} us/request vs {small:.0f} us small = "
                   f"{large / small:.2f}x (target within 10%): {_verdict(large <= small * 1.1)}")
    for name, conc, gw, floor, lite in run.litellm:
        out.append(f"- vs LiteLLM, {name} c={conc}: throughput {_ratio(gw.rps, lite.rps)} (target >= 30x): "
                   f"{_verdict(gw.rps >= 30 * lite.rps)}; CPU/request {_ratio(lite.cpu_us, gw.cpu_us)} less "
                   f"(target >= 30x): {_verdict(lite.cpu_us >= 30 * gw.cpu_us)} (the floor, same rounds: "
                   f"{_ratio(floor.rps, lite.rps)}, {_ratio(lite.cpu_us, floor.cpu_us)} less)")
    return out


def markdown(run: Run) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.started))
    mode = "QUICK=1" if run.quick else "full"
    out = [f"# Benchmark: gateway vs reference floor on {run.server}", "",
           f"{when}, {platform.node()}, {mode}, each figure the median of {run.rounds} round(s) of "
           f"{run.seconds:g} s, the targets measured in turn (every other round in reverse), wrk -t1, "
           "1 worker, upstream: the simulator's answers replayed from memory (bench/replay.py), "
           "everything on (auth, reservation, metering, ledger, request log). Command: "
           f"`make bench{' QUICK=1' if run.quick else ''}` (BENCH_SERVER={run.server}).", "",
           f"Load average (1 min) at the start {run.load_start:.1f}, at the end {os.getloadavg()[0]:.1f} "
           f"on {os.cpu_count()} cores: anything else running skews every figure. {_stolen(run)} "
           f"Idle cores: {procs.idle_halt()} (concurrency 1 pays a wake-up per hop).", "",
           "Ratios in brackets are gateway / floor. 'added p50' is p50 minus the p50 of calling the "
           "upstream directly with the same request in the client's format.", ""]
    out += _table(run)
    if run.ttft:
        out += ["", "## Time to first byte of streams, c=1 (p50 ms)", "",
                "| scenario | direct | floor | gateway | gateway added | floor added |",
                "|---|---:|---:|---:|---:|---:|"]
        for name, (d, f, g) in run.ttft.items():
            out.append(f"| {name} | {d:.2f} | {f:.2f} | {g:.2f} | {g - d:.2f} | {f - d:.2f} |")
    if run.peak_rss:
        out += ["", f"Peak RSS (largest process): gateway {run.peak_rss['gateway']:.0f} MB, "
                f"floor {run.peak_rss['floor']:.0f} MB."]
    if run.litellm:
        out += ["", "## LiteLLM proxy (same upstream, same load)", "",
                "The floor is measured in the same rounds: its ratios show what a bare relay on this "
                "machine and server reaches against LiteLLM.", "",
                "| scenario | c | gateway rps | floor rps | LiteLLM rps | rps ratio | floor rps ratio | "
                "gateway CPU us | floor CPU us | LiteLLM CPU us | CPU ratio | floor CPU ratio |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, conc, gw, floor, lite in run.litellm:
            out.append(f"| {name} | {conc} | {gw.rps:.0f} | {floor.rps:.0f} | {lite.rps:.0f} | "
                       f"{_ratio(gw.rps, lite.rps)} | {_ratio(floor.rps, lite.rps)} | {gw.cpu_us:.0f} | "
                       f"{floor.cpu_us:.0f} | {lite.cpu_us:.0f} | {_ratio(lite.cpu_us, gw.cpu_us)} | "
                       f"{_ratio(lite.cpu_us, floor.cpu_us)} |")
    out += _https(run) + _slow(run)
    out += ["", "## Targets (issue 14)", "", *targets(run)]
    out += ["", "## Targets (issue 32)", "", *trusted_targets(run), ""]
    return "\n".join(out)


def _https(run: Run) -> list[str]:
    if not run.https:
        return []
    out = ["", "## HTTPS upstream: same-format chat", "",
           "The upstream over TLS on the loopback (a test CA's certificate, trusted through "
           "`SSL_CERT_FILE`; bench/tls.py); gateway and floor started for it, both on aiohttp's "
           "client. 'added p50' is above calling the upstream directly over https.", "",
           "| c | floor p50 ms | gateway p50 ms (x floor) | floor added | gateway added | "
           "floor CPU us/req | gateway CPU us/req (x floor) | gateway rps (x floor) | errors |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in run.https:
        g, f, d = r.gateway, r.floor, r.direct
        out.append(f"| {r.conc} | {f.p50_ms:.2f} | {g.p50_ms:.2f} ({_ratio(g.p50_ms, f.p50_ms)}) | "
                   f"{f.p50_ms - d.p50_ms:.2f} | {g.p50_ms - d.p50_ms:.2f} | {f.cpu_us:.0f} | "
                   f"{g.cpu_us:.0f} ({_ratio(g.cpu_us, f.cpu_us)}) | {g.rps:.0f} ({_ratio(g.rps, f.rps)}) | "
                   f"{g.errors + f.errors + d.errors} |")
    return out


def _slow_row(f: StreamsFigures, pace_ms: float) -> str:
    errors = ", ".join(f"{kind} {n}" for kind, n in f.errors.items()) or "0"
    return (f"| {f.target} | {f.served}/{f.opened} | {f.in_flight} | {errors} | {f.gap_p50_ms:.1f} | "
            f"{f.gap_p99_ms:.1f} | "
            f"{f.gap_p99_ms - pace_ms:.1f} | {f.gap_max_ms:.0f} | {f.first_chunk_p50_ms:.0f} | "
            f"{f.first_chunk_p99_ms:.0f} | {f.cpu_ms_per_stream:.2f} | {f.peak_rss_mb:.0f} |")


def _slow(run: Run) -> list[str]:
    slow = run.slow
    if slow is None:
        return []
    busy = [f"{f.target}: busiest second {100 * f.relay_busiest:.0f}% of a core; over its waves "
            f"relay {f.relay_cpu_s:.1f} s, upstream {f.upstream_cpu_s:.1f} s, load generator "
            f"{f.client_cpu_s:.1f} s of CPU in {f.wall_s:.1f} s" for f in (slow.gateway, slow.floor)]
    return ["", f"## {slow.count:,} slow streams through one worker", "",
            f"{slow.count:,} streaming chat calls opened at once (bench/many_streams.py, its own processes), "
            f"{slow.rounds} wave(s) per relay in turn; the upstream sends each stream's first byte after "
            f"1 s, then {slow.tokens} chunks {slow.pace_ms:.0f} ms apart. A gap is the time between two "
            "reads of a stream's body by the client; 'p99 - pace' is what the whole chain (upstream "
            "timers, relay, client, a shared machine) adds to the upstream's pace; for the gateway it is "
            "the **added inter-chunk p99** (not the gateway's p99 minus the floor's: a floor that cannot "
            "keep up makes its own gaps long, and beside it any gateway would look fast). 'In flight at "
            "once': the most streams of a wave between their first and last chunk at one instant (a "
            "relay that makes calls wait for a free upstream connection shows its cap here). CPU per "
            "stream is the relay's process tree over its waves; peak RSS is `VmHWM` of a relay started "
            "for this alone.", "",
            "| relay | served | in flight at once | errors | gap p50 ms | gap p99 ms | p99 - pace | "
            "largest gap ms | first chunk p50 ms | first chunk p99 ms | CPU ms/stream | peak RSS MB |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            _slow_row(slow.gateway, slow.pace_ms), _slow_row(slow.floor, slow.pace_ms), "",
            f"Added inter-chunk p99: {slow.added_gap_p99_ms:.1f} ms (the floor's, the same way: "
            f"{slow.floor.gap_p99_ms - slow.pace_ms:.1f} ms); CPU per stream "
            f"{_ratio(slow.gateway.cpu_ms_per_stream, slow.floor.cpu_ms_per_stream)} the floor's. "
            f"How busy the relays were (one worker is one process: 100% of a core is as fast as it goes; "
            f"{os.cpu_count()} cores for everything): {'; '.join(busy)}."]


def trusted_targets(run: Run) -> list[str]:
    out: list[str] = []
    https16 = next((r for r in run.https if r.conc == 16), None)
    if https16:
        ratio = https16.gateway.cpu_us / https16.floor.cpu_us if https16.floor.cpu_us else 0.0
        out.append(f"- HTTPS upstream, same-format chat CPU/request at c=16: {https16.gateway.cpu_us:.0f} us "
                   f"vs floor {https16.floor.cpu_us:.0f} us = {ratio:.2f}x (the plain-HTTP target, "
                   f"<= 1.3x): {_verdict(ratio <= 1.3)}")
    slow = run.slow
    if slow:
        added, rss, cpu = slow.added_gap_p99_ms, slow.gateway.peak_rss_mb, slow.cpu_ratio
        # Served whole, and carried at once: a relay that queues calls for upstream connections
        # serves them all, later.
        gw = slow.gateway
        complete = gw.served == gw.opened and gw.in_flight >= 0.95 * slow.count
        out += [f"- {slow.count:,} slow streams, added inter-chunk p99 (the gateway's p99 gap - the "
                f"upstream's {slow.pace_ms:.0f} ms pace): {added:.1f} ms (target < 5 ms): "
                f"{_verdict(added < 5)}",
                f"- {slow.count:,} slow streams, peak RSS of the gateway's worker: {rss:.0f} MB "
                f"(target < 400 MB): {_verdict(rss < 400)}",
                f"- {slow.count:,} slow streams, CPU per stream: {slow.gateway.cpu_ms_per_stream:.2f} ms vs "
                f"floor {slow.floor.cpu_ms_per_stream:.2f} ms = {cpu:.2f}x (target <= 1.3x): "
                f"{_verdict(cpu <= 1.3)}",
                f"- {slow.count:,} slow streams, every stream served whole by the gateway and carried "
                f"at once: {slow.gateway.served}/{slow.gateway.opened} served, at most "
                f"{slow.gateway.in_flight:,} in flight at once (floor {slow.floor.in_flight:,}; target: all, "
                f"95% at once): {_verdict(complete)}"]
    return out
