"""``python -m bench.ab OTHER_TREE``: the gateway of this tree against the gateway of another
checkout (e.g. ``git worktree add /tmp/before HEAD~1``) and the floor, on the same simulator,
alternated round by round (every other round in reverse order), so that a change is measured on a
machine whose load drifts (every figure is the median of the rounds).

Scenarios: same-format chat non-stream at concurrency 1 and 16 (wrk) and the time to the first
byte of a chat stream at concurrency 1, on the paced twin that ``make bench`` measures it on.
Environment: BENCH_SERVER, BENCH_SECONDS (per measurement, default 2), AB_ROUNDS (default 5).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import measure, procs
from bench.__main__ import ADMIN_KEY, _make_key
from bench.measure import Target
from bench.scenarios import PACED, all_scenarios
from gateway.server.servers import DEFAULT_SERVER


def _start_gateway_from(tree: Path, config: Path, port: int, server: str,
                        log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--config", str(config),
                                 "--server", server], stdout=out, stderr=subprocess.STDOUT, cwd=tree,
                                # granian's workers import the app afresh: from this tree too
                                env={**os.environ, "PYTHONPATH": str(tree)})
    procs.wait_listening(port, proc)
    return proc


def main() -> int:
    other = Path(sys.argv[1]).resolve()
    server = os.environ.get("BENCH_SERVER", DEFAULT_SERVER)
    seconds = float(os.environ.get("BENCH_SECONDS", "2"))
    rounds = int(os.environ.get("AB_ROUNDS", "5"))
    chat = {s.name: s for s in all_scenarios(32, 10_000)}["chat"]
    stream = {s.name: s for s in all_scenarios(32, 10_000, PACED)}["chat stream"]
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "processes.log"
        sim_port, floor_port = procs.free_port(), procs.free_port()
        started = procs.start_upstream(sim_port, log)
        try:
            sim_base = f"http://127.0.0.1:{sim_port}"
            targets = [Target("floor", f"http://127.0.0.1:{floor_port}", None, "none", True)]
            started.append(procs.start_floor(server, floor_port, sim_base, log))
            targets[0].pid = started[-1].pid
            for name, tree in (("before", other), ("after", procs.ROOT)):
                port = procs.free_port()
                config = procs.write_config(tmp, name, port, sim_port, ADMIN_KEY)
                started.append(_start_gateway_from(tree, config, port, server, log))
                base = f"http://127.0.0.1:{port}"
                targets.append(Target(name, base, started[-1].pid, asyncio.run(_make_key(base)), False))
            for target in targets:
                measure.check(target, chat)
                measure.measure(target, chat, 16, 1)  # warm up
            load = [os.getloadavg()[0]]
            for round_no in range(rounds):
                # Every other round in reverse: a target measured always right after another one
                # (warmer caches, a CPU clock still up) would otherwise be favoured every round.
                for _, target in measure.in_turn(targets, round_no):
                    for conc in (1, 16):
                        f = measure.measure(target, chat, conc, seconds)
                        figures.setdefault(f"{target.name} c={conc} cpu_us", []).append(f.cpu_us)
                        figures.setdefault(f"{target.name} c={conc} p50_ms", []).append(f.p50_ms)
                        figures.setdefault(f"{target.name} c={conc} p99_ms", []).append(f.p99_ms)
                        figures.setdefault(f"{target.name} c={conc} rps", []).append(f.rps)
                    ttfb = measure.ttft(target, stream, 40).pct(0.5, "ttft") * 1000
                    figures.setdefault(f"{target.name} stream ttfb_ms", []).append(ttfb)
                load.append(os.getloadavg()[0])
        except Exception:
            print(log.read_text(errors="replace")[-4000:] if log.exists() else "", file=sys.stderr)
            raise
        finally:
            for proc in reversed(started):
                procs.stop(proc)
    print(f"{server}, {rounds} rounds x {seconds:g} s, load average (1 min) {min(load):.1f}-{max(load):.1f}, "
          f"medians; before = {other}\n")
    print("| figure | floor | before | after | before/floor | after/floor |")
    print("|---|---:|---:|---:|---:|---:|")
    for what in ("c=1 cpu_us", "c=16 cpu_us", "c=1 p50_ms", "c=16 p50_ms", "c=16 p99_ms", "c=1 rps",
                 "c=16 rps", "stream ttfb_ms"):
        fl, b, a = (statistics.median(figures[f"{t} {what}"]) for t in ("floor", "before", "after"))
        print(f"| {what} | {fl:.2f} | {b:.2f} | {a:.2f} | {b / fl:.2f}x | {a / fl:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
