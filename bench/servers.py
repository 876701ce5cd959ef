"""``make bench-servers``: the floor and the gateway on every supported ASGI server, one server after
the other in one run (same-format chat, plain at concurrency 1 and 16, streamed at 16), written to
``bench/results/servers.md``: what each costs. The default server (gateway.server.servers.DEFAULT_SERVER,
granian) is chosen for what it enforces stock (a request-head size limit and deadline), not for
speed; a server whose optional extra is not installed is left out."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from bench import measure, procs
from bench.__main__ import ADMIN_KEY, RESULTS, _make_key
from bench.measure import Figures, Target
from bench.scenarios import all_scenarios
from gateway.server.servers import DEFAULT_SERVER, SERVERS, not_installed


def main() -> int:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    seconds = float(os.environ.get("BENCH_SECONDS", "2" if quick else "4"))
    chat, stream = next(s for s in all_scenarios(32, 10) if s.name == "chat"), next(
        s for s in all_scenarios(32, 10) if s.name == "chat stream")
    plan = ((chat, 1), (chat, 16), (stream, 16))
    rows: list[tuple[str, str, int, Figures, Figures]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "processes.log"
        sim_port = procs.free_port()
        upstream = procs.start_upstream(sim_port, log)
        try:
            for server in (name for name in SERVERS if not_installed(name) is None):
                gw_port, floor_port = procs.free_port(), procs.free_port()
                config = procs.write_config(tmp, f"gw-{server}", gw_port, sim_port, ADMIN_KEY)
                gateway = procs.start_gateway(config, gw_port, server, log)
                floor = procs.start_floor(server, floor_port, f"http://127.0.0.1:{sim_port}", log)
                try:
                    key = asyncio.run(_make_key(f"http://127.0.0.1:{gw_port}"))
                    gw = Target("gateway", f"http://127.0.0.1:{gw_port}", gateway.pid, key, False)
                    fl = Target("floor", f"http://127.0.0.1:{floor_port}", floor.pid, "none", True)
                    for scenario, conc in plan:
                        measure.check(gw, scenario)
                        row = (server, scenario.name, conc, measure.measure(fl, scenario, conc, seconds),
                               measure.measure(gw, scenario, conc, seconds))
                        rows.append(row)
                        f, g = row[3], row[4]
                        print(f"{server:<10} {scenario.name:<12} c={conc:<3} floor {f.rps:6.0f} rps "
                              f"{f.cpu_us:5.0f} us  gateway {g.rps:6.0f} rps {g.cpu_us:5.0f} us",
                              file=sys.stderr, flush=True)
                finally:
                    procs.stop(floor)
                    procs.stop(gateway)
        finally:
            for proc in reversed(upstream):
                procs.stop(proc)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out = [f"# ASGI servers: floor and gateway on each ({when}, `make bench-servers`, {seconds:g} s each)",
           "", f"Default: {DEFAULT_SERVER}. CPU per request (us), /proc of the server's process tree.",
           "", "| server | scenario | c | floor rps | floor CPU us | gateway rps | gateway CPU us | "
           "gateway/floor CPU |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for server, name, conc, f, g in rows:
        out.append(f"| {server} | {name} | {conc} | {f.rps:.0f} | {f.cpu_us:.0f} | {g.rps:.0f} | "
                   f"{g.cpu_us:.0f} | {g.cpu_us / f.cpu_us if f.cpu_us else 0:.2f}x |")
    text = "\n".join(out) + "\n"
    target = Path(os.environ.get("BENCH_OUT", RESULTS / "servers.md"))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
