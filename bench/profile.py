"""``python -m bench.profile``: a py-spy profile of the gateway's serving process under load
(same-format chat, non-stream by default), the hot paths summarised by own time and by total
(inclusive) time per function.

The gateway runs like in ``make bench`` (simulator upstream answering at once, one worker,
everything on, the access log off); wrk loads it while ``py-spy record --format raw`` samples the
worker (granian serves from a child process). py-spy is in the ``bench`` extra.

Environment: BENCH_SERVER, BENCH_SECONDS (default 10), PROFILE_CONC (default 16),
PROFILE_SCENARIO (default "chat"), PROFILE_TOP (default 25), PROFILE_RAW (keep the collapsed
stacks at this path).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from bench import procs, wrk
from bench.__main__ import ADMIN_KEY, _make_key
from bench.measure import Target, request_of
from bench.scenarios import all_scenarios
from gateway.server.servers import DEFAULT_SERVER


def _serving_pid(pid: int) -> int:
    """The process that serves: the deepest descendant (granian's worker), else ``pid``."""
    return procs.tree(pid)[-1]


def summarise(raw: str, top: int) -> str:
    """Own and inclusive sample shares per function from py-spy's collapsed stacks."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        return "no samples\n"
    lines = [f"{total} samples\n", "| own % | function |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in own.most_common(top)]
    lines += ["", "| total % | function |", "|---:|---|"]
    lines += [f"| {100 * n / total:.1f} | `{name}` |" for name, n in inclusive.most_common(top * 2)]
    return "\n".join(lines) + "\n"


def _short(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file.py)``: lines merged, paths shortened."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(path).parts
    tail = "/".join(parts[parts.index("site-packages") + 1:]) if "site-packages" in parts else \
        "/".join(parts[-2:])
    return f"{name} ({tail})"


def main() -> int:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    server = os.environ.get("BENCH_SERVER", DEFAULT_SERVER)
    seconds = float(os.environ.get("BENCH_SECONDS", "10"))
    conc = int(os.environ.get("PROFILE_CONC", "16"))
    name = os.environ.get("PROFILE_SCENARIO", "chat")
    scenario = next(s for s in all_scenarios(32, 10_000) if s.name == name)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "processes.log"
        sim_port, gw_port = procs.free_port(), procs.free_port()
        upstream = procs.start_upstream(sim_port, log)
        gateway = None
        try:
            config = procs.write_config(tmp, "small", gw_port, sim_port, ADMIN_KEY)
            gateway = procs.start_gateway(config, gw_port, server, log)
            base = f"http://127.0.0.1:{gw_port}"
            key = asyncio.run(_make_key(base))
            url, body, hdrs = request_of(Target("gateway", base, gateway.pid, key, False), scenario)
            wrk.run(url, body, hdrs, connections=conc, seconds=2)  # warm up
            raw_path = tmp / "profile.txt"
            record = subprocess.Popen([spy, "record", "--format", "raw", "--rate", "250", "--nonblocking",
                                       "--duration", str(int(seconds)), "--output", str(raw_path),
                                       "--pid", str(_serving_pid(gateway.pid))],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            result: list[wrk.Result] = []
            load = threading.Thread(target=lambda: result.append(
                wrk.run(url, body, hdrs, connections=conc, seconds=seconds)))
            load.start()
            record.wait()
            load.join()
            raw = raw_path.read_text()
            if os.environ.get("PROFILE_RAW"):
                Path(os.environ["PROFILE_RAW"]).write_text(raw)
        except Exception:
            print(log.read_text(errors="replace")[-4000:] if log.exists() else "", file=sys.stderr)
            raise
        finally:
            if gateway is not None:
                procs.stop(gateway)
            for proc in reversed(upstream):
                procs.stop(proc)
    load_avg = os.getloadavg()[0]
    print(f"# {name}, c={conc}, {server}, {seconds:.0f} s: {result[0].rps:.0f} req/s, "
          f"p50 {result[0].p50_ms:.2f} ms (load average {load_avg:.1f})\n")
    print(summarise(raw, int(os.environ.get("PROFILE_TOP", "25"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
