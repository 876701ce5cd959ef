"""Property 1, full size: while maximal bodies are processed, other requests are not held up and the
process stays within a small multiple of the body limit.

    .venv/bin/python -m tests.stress.fairness [--attempts N]

Against a gateway process (``harness.gateway``, json_body_bytes 32 MB): ``/healthz`` is probed
every 10 ms from a thread, idle and then while (a) a 31 MB ``/v1/messages`` call translated for a
chat upstream, (b) a ``/v1/messages`` call and a ``count_tokens`` call each of as many tiny messages
as ``limits.json_max_elements`` allows (133,000: the most decoding work a body may ask for), (c) a
29 MB body of 900,000 tiny messages, which is over that limit and refused (400), and (d) four
clients looping 8 MB ``count_tokens`` bodies are served. Passes (exit 0) when the p99 under load is
within 100 ms of the idle p99, every call is answered as expected, and the peak RSS growth stays
under 8x the body limit; before that, each maximal request is also served alone, and the growth it
causes must stay under 5x the body limit (``one_at_a_time``). Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import sys
import threading
import time
from typing import Any

import orjson

from gateway.settings.config import LimitsConfig
from tests.stress.harness import gateway, percentile, rss_of

LIMIT = 32 * 1024 * 1024
MAX_ELEMENTS = LimitsConfig().json_max_elements
AT_LIMIT = (MAX_ELEMENTS - 10) // 3  # messages: each is an array item and two members
EXTRA_P99_S = 0.100
RSS_MULTIPLE = 8  # all of them at once
SINGLE_RSS_MULTIPLE = 5  # any one of them alone
LOOP_S = 15.0


def _text_body(model: str, size: int) -> bytes:
    return orjson.dumps({"model": model, "max_tokens": 5,
                         "messages": [{"role": "user", "content": "word, " * (size // 6)}]})


def _many_body(model: str, count: int) -> bytes:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"} for i in range(count | 1)]
    return orjson.dumps({"model": model, "max_tokens": 5, "messages": messages})


def _post(port: int, path: str, key: str, body: bytes) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", path, body=body, headers={"Authorization": f"Bearer {key}",
                                                       "anthropic-version": "2023-06-01",
                                                       "Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _probe(port: int, stop: threading.Event, out: list[float]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while not stop.is_set():
        started = time.perf_counter()
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        out.append(time.perf_counter() - started)
        time.sleep(0.01)
    conn.close()


def _rss(pid: int, stop: threading.Event, out: list[int]) -> None:
    while not stop.is_set():
        out.append(rss_of(pid))
        time.sleep(0.05)


async def _alone(pid: int, port: int, key: str, path: str, body: bytes) -> dict[str, Any]:
    """One maximal request with nothing else in flight: its status, the serving process's RSS
    growth over the RSS before it, and the slowest ``/healthz`` meanwhile."""
    before = rss_of(pid)
    stop = threading.Event()
    probes: list[float] = []
    rss: list[int] = []
    prober = asyncio.create_task(asyncio.to_thread(_probe, port, stop, probes))
    watcher = asyncio.create_task(asyncio.to_thread(_rss, pid, stop, rss))
    status = await asyncio.to_thread(_post, port, path, key, body)
    await asyncio.sleep(0.1)
    stop.set()
    await prober
    await watcher
    return {"status": status, "rss_growth_x_limit": round((max(rss, default=before) - before) / LIMIT, 2),
            "healthz_max_ms": round(max(probes, default=0.0) * 1000, 1)}


async def run() -> dict[str, Any]:
    big_text = _text_body("sim-chat", 31 * 1024 * 1024)
    at_limit = _many_body("sim-claude", AT_LIMIT)
    at_limit_chat = _many_body("sim-chat", AT_LIMIT)
    over = _many_body("sim-claude", 900_000)
    medium = _text_body("sim-claude", 8 * 1024 * 1024)
    async with gateway(limits={"json_body_bytes": LIMIT}) as g:
        port = int(g.base_url.rsplit(":", 1)[1])
        stop = threading.Event()
        idle: list[float] = []
        prober = asyncio.create_task(asyncio.to_thread(_probe, port, stop, idle))
        await asyncio.sleep(3)
        stop.set()
        await prober
        singles = {name: await _alone(g.pid, port, g.key, path, body) for name, path, body in (
            ("translated_31mb_text", "/v1/messages", big_text),
            ("translated_at_element_limit", "/v1/messages", at_limit_chat),
            ("count_tokens_at_element_limit", "/v1/messages/count_tokens", at_limit),
            ("count_tokens_8mb_text", "/v1/messages/count_tokens", medium),
            ("over_element_limit", "/v1/messages/count_tokens", over))}
        base_rss = rss_of(g.pid)
        stop = threading.Event()
        loaded: list[float] = []
        rss: list[int] = []
        prober = asyncio.create_task(asyncio.to_thread(_probe, port, stop, loaded))
        watcher = asyncio.create_task(asyncio.to_thread(_rss, g.pid, stop, rss))
        until = time.monotonic() + LOOP_S

        def looping() -> list[int]:
            statuses = []
            while time.monotonic() < until:
                statuses.append(_post(port, "/v1/messages/count_tokens", g.key, medium))
            return statuses

        results = await asyncio.gather(
            asyncio.to_thread(_post, port, "/v1/messages", g.key, big_text),
            asyncio.to_thread(_post, port, "/v1/messages/count_tokens", g.key, at_limit),
            asyncio.to_thread(_post, port, "/v1/messages", g.key, at_limit_chat),
            asyncio.to_thread(_post, port, "/v1/messages/count_tokens", g.key, over),
            *(asyncio.to_thread(looping) for _ in range(4)))
        stop.set()
        await prober
        await watcher
    refused = results[3]
    statuses = [*results[:3], *(s for loop in results[4:] for s in loop)]  # type: ignore[union-attr]
    idle_p99, load_p99 = percentile(idle, 0.99), percentile(loaded, 0.99)
    growth = max(rss) - base_rss
    result = {
        "calls": len(statuses) + 1, "statuses": sorted(set(statuses)), "over_limit_status": refused,
        "healthz_idle_p50_ms": round(percentile(idle, 0.5) * 1000, 1),
        "healthz_idle_p99_ms": round(idle_p99 * 1000, 1),
        "healthz_load_p50_ms": round(percentile(loaded, 0.5) * 1000, 1),
        "healthz_load_p99_ms": round(load_p99 * 1000, 1), "healthz_load_max_ms": round(max(loaded) * 1000, 1),
        "healthz_samples": len(loaded), "rss_base_mb": round(base_rss / 2**20, 1),
        "rss_peak_mb": round(max(rss) / 2**20, 1), "rss_growth_x_limit": round(growth / LIMIT, 2),
    }
    result["one_at_a_time"] = singles
    alone_ok = all(one["status"] == (400 if name == "over_element_limit" else 200)
                   and one["rss_growth_x_limit"] < SINGLE_RSS_MULTIPLE for name, one in singles.items())
    result["passed"] = (load_p99 - idle_p99 < EXTRA_P99_S and set(statuses) == {200} and refused == 400
                        and growth < RSS_MULTIPLE * LIMIT and alone_ok)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=1,
                        help="runs until one passes (a p99 on a shared machine is noisy; CI allows 2)")
    attempts = parser.parse_args().attempts
    for _ in range(max(attempts, 1)):
        result = asyncio.run(run())
        print(orjson.dumps(result).decode(), flush=True)
        if result["passed"]:
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
