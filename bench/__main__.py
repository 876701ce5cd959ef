"""``make bench``: the same workloads sent straight to the simulator and through the gateway, in
one run, printed as one table.

Columns: throughput (req/s), p50/p99 latency (ms), added latency (gateway p50 minus direct p50),
gateway CPU microseconds per request (from /proc, the gateway process's own accounting), and for
streams the p50 time to first token both ways and the per-chunk overhead: the gateway's CPU time per
relayed SSE event, and the latency it adds per event after the first (p50 of the time from first to
last event, gateway minus direct, divided by the events). Peak RSS of the gateway is printed at the
end. The simulator streams with ``BENCH_TOKEN_MS`` (default 1 ms) between tokens, like a fast model.

Environment knobs: BENCH_N1 (requests at concurrency 1, default 300), BENCH_N64 (at 64, default
3000), BENCH_TOKENS (output tokens per answer, default 32).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from bench import load, procs

ADMIN_KEY = "bench-admin-key"


@dataclass
class Workload:
    name: str
    path: str
    body: dict[str, object]
    family: str  # how to authenticate
    stream: bool
    direct_model: str  # the model id the simulator is asked for when called directly


def _workloads(tokens: int) -> list[Workload]:
    prompt = f"Write about gateways. sim:tokens={tokens}"  # the simulator's directive: exact length
    chat = {"model": "sim-chat", "messages": [{"role": "user", "content": prompt}]}
    messages = {"model": "sim-claude", "max_tokens": 1024, "messages": [{"role": "user", "content": prompt}]}
    return [
        Workload("chat", "/v1/chat/completions", chat, "chat", False, "sim-chat"),
        Workload("chat stream", "/v1/chat/completions", {**chat, "stream": True}, "chat", True, "sim-chat"),
        Workload("messages (same format)", "/v1/messages", messages, "messages", False, "sim-claude"),
        Workload("messages stream (same format)", "/v1/messages", {**messages, "stream": True}, "messages",
                 True, "sim-claude"),
        Workload("messages on chat upstream", "/v1/messages", {**messages, "model": "claude-on-chat"},
                 "messages", False, "sim-claude"),
        Workload("messages stream on chat upstream", "/v1/messages",
                 {**messages, "model": "claude-on-chat", "stream": True}, "messages", True, "sim-claude"),
    ]


def _headers(family: str, key: str) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if family == "messages":
        headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    else:
        headers["Authorization"] = f"Bearer {key}"
    return headers


async def _make_key(base: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base}/admin/users", json={"name": "bench", "quota_usd": 1_000_000},
                                headers=admin) as r:
            user = await r.json()
        async with session.post(f"{base}/admin/keys", json={"user_id": user["id"], "name": "bench"},
                                headers=admin) as r:
            return (await r.json())["key"]


def _row(name: str, conc: int, direct: load.Result, via: load.Result, cpu_us: float, stream: bool) -> str:
    added = (via.pct(0.5) - direct.pct(0.5)) * 1000
    cells = [f"{name:<34}", f"{conc:>4}", f"{direct.throughput:>8.0f}", f"{via.throughput:>8.0f}",
             f"{direct.pct(0.5) * 1000:>7.2f}", f"{via.pct(0.5) * 1000:>7.2f}",
             f"{direct.pct(0.99) * 1000:>7.2f}", f"{via.pct(0.99) * 1000:>7.2f}", f"{added:>7.2f}",
             f"{cpu_us:>7.0f}"]
    if stream:
        events = max(via.mean_chunks, 1.0)
        tail_added = via.pct(0.5, "tail") - direct.pct(0.5, "tail")
        cells += [f"{direct.pct(0.5, 'ttft') * 1000:>7.2f}", f"{via.pct(0.5, 'ttft') * 1000:>7.2f}",
                  f"{cpu_us / events:>8.1f}", f"{tail_added / events * 1e6:>8.1f}"]
    errors = direct.errors + via.errors
    return " ".join(cells) + (f"  ({errors} errors)" if errors else "")


HEADER = (f"{'workload':<34} {'conc':>4} {'rps dir':>8} {'rps gw':>8} {'p50 dir':>7} {'p50 gw':>7} "
          f"{'p99 dir':>7} {'p99 gw':>7} {'added':>7} {'cpu us':>7} {'ttft d':>7} {'ttft gw':>7} "
          f"{'cpu/evt':>8} {'lat/evt':>8}")


async def main() -> int:
    n1 = int(os.environ.get("BENCH_N1", "300"))
    n64 = int(os.environ.get("BENCH_N64", "3000"))
    tokens = int(os.environ.get("BENCH_TOKENS", "32"))
    sim_port, gw_port = procs.free_port(), procs.free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = procs.write_config(Path(tmp), gw_port, sim_port, ADMIN_KEY)
        simulator = procs.start_simulator(sim_port, float(os.environ.get("BENCH_TOKEN_MS", "1")))
        gateway = procs.start_gateway(config, gw_port)
        try:
            gw_base = f"http://127.0.0.1:{gw_port}"
            sim_base = f"http://127.0.0.1:{sim_port}"
            key = await _make_key(gw_base)
            print("latencies in ms; 'added' = gateway p50 - direct p50; cpu us = gateway CPU per request;")
            print("cpu/evt, lat/evt = gateway CPU and added latency per relayed stream event, in us\n")
            print(HEADER)
            for work in _workloads(tokens):
                direct_body = orjson.dumps({**work.body, "model": work.direct_model})
                via_body = orjson.dumps(work.body)
                for conc, total in ((1, n1), (64, n64)):
                    sim_headers = _headers(work.family, "sk-sim")
                    direct = await load.run(sim_base + work.path, direct_body, sim_headers,
                                            concurrency=conc, total=total, stream=work.stream)
                    cpu_before = procs.cpu_seconds(gateway.pid)
                    via = await load.run(gw_base + work.path, via_body, _headers(work.family, key),
                                         concurrency=conc, total=total, stream=work.stream)
                    cpu_us = (procs.cpu_seconds(gateway.pid) - cpu_before) / max(len(via.samples), 1) * 1e6
                    print(_row(work.name, conc, direct, via, cpu_us, work.stream), flush=True)
            print(f"\ngateway peak RSS: {procs.peak_rss_mb(gateway.pid):.1f} MB")
        finally:
            procs.stop(gateway)
            procs.stop(simulator)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
