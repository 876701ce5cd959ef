"""Property 1, full size: while maximal bodies are processed, other requests are not held up and the
process stays within a small multiple of the body limit.

    .venv/bin/python -m tests.stress.fairness

Against a gateway process (``harness.gateway``, json_body_bytes 32 MB): ``/healthz`` is probed
every 10 ms from a thread, idle and then while (a) a 31 MB ``/v1/messages`` call translated for a
chat upstream, (b) a 29 MB ``count_tokens`` body of 900,000 tiny messages, and (c) four clients
looping 8 MB ``count_tokens`` bodies are served. Passes (exit 0) when the p99 under load is within
100 ms of the idle p99, every call is answered, and the peak RSS growth stays under 8x the body
limit. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import http.client
import sys
import threading
import time
from typing import Any

import orjson

from tests.stress.harness import gateway, percentile, rss_of

LIMIT = 32 * 1024 * 1024
EXTRA_P99_S = 0.100
RSS_MULTIPLE = 8
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


async def run() -> dict[str, Any]:
    big_text = _text_body("sim-chat", 31 * 1024 * 1024)
    many = _many_body("sim-claude", 900_000)
    medium = _text_body("sim-claude", 8 * 1024 * 1024)
    async with gateway(limits={"json_body_bytes": LIMIT}) as g:
        port = int(g.base_url.rsplit(":", 1)[1])
        stop = threading.Event()
        idle: list[float] = []
        prober = asyncio.create_task(asyncio.to_thread(_probe, port, stop, idle))
        await asyncio.sleep(3)
        stop.set()
        await prober
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
            asyncio.to_thread(_post, port, "/v1/messages/count_tokens", g.key, many),
            *(asyncio.to_thread(looping) for _ in range(4)))
        stop.set()
        await prober
        await watcher
    statuses = [results[0], results[1], *(s for loop in results[2:] for s in loop)]  # type: ignore[union-attr]
    idle_p99, load_p99 = percentile(idle, 0.99), percentile(loaded, 0.99)
    growth = max(rss) - base_rss
    result = {
        "calls": len(statuses), "statuses": sorted(set(statuses)),
        "healthz_idle_p50_ms": round(percentile(idle, 0.5) * 1000, 1),
        "healthz_idle_p99_ms": round(idle_p99 * 1000, 1),
        "healthz_load_p50_ms": round(percentile(loaded, 0.5) * 1000, 1),
        "healthz_load_p99_ms": round(load_p99 * 1000, 1), "healthz_load_max_ms": round(max(loaded) * 1000, 1),
        "healthz_samples": len(loaded), "rss_base_mb": round(base_rss / 2**20, 1),
        "rss_peak_mb": round(max(rss) / 2**20, 1), "rss_growth_x_limit": round(growth / LIMIT, 2),
    }
    result["passed"] = (load_p99 - idle_p99 < EXTRA_P99_S and set(statuses) == {200}
                        and growth < RSS_MULTIPLE * LIMIT)
    return result


def main() -> int:
    result = asyncio.run(run())
    print(orjson.dumps(result).decode())
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
