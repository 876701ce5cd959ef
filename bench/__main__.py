"""``make bench``: the gateway, the reference floor (bench/floor.py, a bare relay on the same ASGI
server) and the upstream called directly, interleaved scenario by scenario in one run; results
printed and written to ``bench/results/latest.md`` (see bench/report.py for what each figure is).

Environment: BENCH_QUICK=1 (or ``make bench QUICK=1``: about 3 minutes, concurrency 1 and 16,
1 s per measurement, one round), BENCH_SERVER (default: the gateway's default server),
BENCH_SECONDS (of one measurement; default 2), BENCH_ROUNDS (each figure is the median of this many
rounds, the targets measured in turn; default 3),
BENCH_COMPARE=1 (``make bench-compare``: adds the LiteLLM proxy), BENCH_SCALE=0 (skip the
100,000-key / 1,000-model check), BENCH_HTTPS=0 (skip the HTTPS upstream), BENCH_STREAMS (how many
slow streams at once; default 2,000; 0 skips them), BENCH_OUT (the results file).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from bench import compare, https_upstream, measure, procs, report, slow_streams, wrk
from bench.measure import Target
from bench.scenarios import PACED, Scenario, all_scenarios
from gateway.server.servers import DEFAULT_SERVER

ADMIN_KEY = "bench-admin-key"
RESULTS = Path(__file__).resolve().parent / "results"


async def _make_key(base: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/admin/users", json={"name": "bench", "quota_usd": 10_000_000},
                                headers=admin) as r:
            user = await r.json()
        async with session.post(f"{base}/admin/keys", json={"user_id": user["id"], "name": "bench"},
                                headers=admin) as r:
            return str((await r.json())["key"])


def _key(base: str) -> str:
    return asyncio.run(_make_key(base))


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    if not wrk.available():
        _say("wrk is not installed (apt-get install -y wrk)")
        return 2
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    server = os.environ.get("BENCH_SERVER", DEFAULT_SERVER)
    seconds = float(os.environ.get("BENCH_SECONDS", "1" if quick else "2"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "1" if quick else "3"))
    concurrencies = (1, 16) if quick else (1, 16, 64)
    long_tokens = 10_000
    run = report.Run(server=server, quick=quick, seconds=seconds, rounds=rounds, started=time.time())
    scenarios = all_scenarios(32, long_tokens)
    paced = {s.name: s for s in all_scenarios(32, long_tokens, PACED)}
    procs.raise_fd_limit()  # every process started inherits it: the slow streams hold thousands of sockets
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "processes.log"
        sim_port, gw_port, floor_port = procs.free_port(), procs.free_port(), procs.free_port()
        sim_base = f"http://127.0.0.1:{sim_port}"
        started = procs.start_upstream(sim_port, log)
        try:
            gateway = procs.start_gateway(procs.write_config(tmp, "small", gw_port, sim_port, ADMIN_KEY),
                                          gw_port, server, log)
            started.append(gateway)
            floor = procs.start_floor(server, floor_port, sim_base, log)
            started.append(floor)
            key = _key(f"http://127.0.0.1:{gw_port}")
            direct = Target("direct", sim_base, None, "sk-sim", True)
            floor_t = Target("floor", f"http://127.0.0.1:{floor_port}", floor.pid, "none", True)
            gw = Target("gateway", f"http://127.0.0.1:{gw_port}", gateway.pid, key, False)
            for scenario in scenarios:
                chunks = measure.check(gw, scenario)
                measure.check(floor_t, scenario)
                rss_before = procs.rss_mb(gateway.pid, "VmRSS")
                for conc in concurrencies if scenario.kind != "long" else concurrencies[:2]:
                    if scenario.kind == "long":  # a fixed number of whole streams (measure_fixed)
                        figures = [measure.measure_fixed(t, scenario, conc, conc * (2 if quick else 4))
                                   for t in (direct, floor_t, gw)]
                    else:
                        figures = measure.interleaved((direct, floor_t, gw), scenario, conc, seconds, rounds)
                    row = report.Row(scenario, conc, chunks, *figures)
                    run.rows.append(row)
                    _say(report.console_line(row))
                    if scenario.kind == "long" and conc == 1:  # one stream at a time: its own memory
                        run.long_rss[scenario.name] = (rss_before, procs.rss_mb(gateway.pid, "VmRSS"))
                if scenario.stream and scenario.kind != "long":
                    total = 50 if quick else 200
                    d, f, g = measure.ttft_p50_ms((direct, floor_t, gw), paced[scenario.name], total, rounds)
                    run.ttft[scenario.name] = (d, f, g)
            run.peak_rss = {"gateway": procs.rss_mb(gateway.pid), "floor": procs.rss_mb(floor.pid)}
            if os.environ.get("BENCH_HTTPS", "1") != "0":
                run.https = https_upstream.run(tmp, sim_base, server, ADMIN_KEY, _key, log, scenarios[0],
                                               (1, 16), seconds, rounds)
                for row in run.https:
                    _say("https " + report.console_line(row))
            streams = int(os.environ.get("BENCH_STREAMS", "2000"))
            if streams:
                run.slow = slow_streams.run(tmp, sim_port, server, ADMIN_KEY, _key, log, count=streams,
                                            tokens=40, rounds=rounds, upstream_pid=started[1].pid)
                _say(report.slow_line(run.slow))
            if os.environ.get("BENCH_SCALE", "1") != "0":
                run.scale = _scale(tmp, sim_port, gw, scenarios[0], seconds * 2, log)
            if os.environ.get("BENCH_COMPARE", "") not in ("", "0"):
                run.litellm = compare.litellm(tmp, sim_base, gw, floor_t, scenarios, concurrencies,
                                              seconds * 2, rounds, log)
        except Exception:
            _say(log.read_text(errors="replace")[-4000:] if log.exists() else "")
            raise
        finally:
            for proc in reversed(started):
                procs.stop(proc)
    text = report.markdown(run)
    out = Path(os.environ.get("BENCH_OUT", RESULTS / "latest.md"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    _say(f"written to {out}")
    return 0


def _scale(tmp: Path, sim_port: int, small: Target, scenario: Scenario, seconds: float,
           log: Path) -> dict[str, float]:
    """CPU per request of same-format chat on the small setup and on one with 100,000 keys in the
    database and 1,000 more models in the config, measured alternately."""
    port = procs.free_port()
    config = procs.write_config(tmp, "large", port, sim_port, ADMIN_KEY, extra_models=1000)
    big = procs.start_gateway(config, port, os.environ.get("BENCH_SERVER", DEFAULT_SERVER), log)
    try:
        key = _key(f"http://127.0.0.1:{port}")
        procs.add_keys(tmp / "large.db", 100_000)
        large = Target("gateway-large", f"http://127.0.0.1:{port}", big.pid, key, False)
        measure.check(large, scenario)
        cpu: dict[str, list[float]] = {"small": [], "large": []}
        for _ in range(3):
            for name, target in (("small", small), ("large", large)):
                cpu[name].append(measure.measure(target, scenario, 16, seconds).cpu_us)
        return {name: sorted(values)[1] for name, values in cpu.items()}  # the median of three
    finally:
        procs.stop(big)


if __name__ == "__main__":
    sys.exit(main())
