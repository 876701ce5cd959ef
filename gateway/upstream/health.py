"""How each upstream has been doing lately, for ``GET /admin/upstreams`` and the console.

The pool records every attempt's outcome here (``UpstreamPool.mark_success``/``mark_failure``);
only the last ``window_s`` seconds count, kept as one small bucket per 10 seconds per upstream so
that memory stays bounded however busy the gateway is. Numbers are per gateway process, like the
cool-downs they sit beside.
"""

from __future__ import annotations

import time
from collections import deque

import msgspec

BUCKET_S = 10.0


class HealthStats(msgspec.Struct):
    """Attempts of one upstream in the window: how many, how many failed, mean latency to the
    first byte of the successful ones (None when none measured)."""

    attempts: int
    failures: int
    error_rate: float  # failures / attempts, 0.0 without attempts
    latency_ms: float | None


class _Bucket:
    __slots__ = ("failures", "latency_n", "latency_sum", "start", "successes")

    def __init__(self, start: float) -> None:
        self.start = start
        self.successes = 0
        self.failures = 0
        self.latency_sum = 0.0
        self.latency_n = 0


class UpstreamHealth:
    def __init__(self, window_s: float = 300.0) -> None:
        self.window_s = window_s
        self._buckets: dict[str, deque[_Bucket]] = {}

    def record(self, name: str, ok: bool, latency_ms: float | None = None, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        buckets = self._buckets.setdefault(name, deque())
        self._expire(buckets, now)
        start = now - now % BUCKET_S
        if not buckets or buckets[-1].start != start:
            buckets.append(_Bucket(start))
        bucket = buckets[-1]
        if ok:
            bucket.successes += 1
            if latency_ms is not None:
                bucket.latency_sum += latency_ms
                bucket.latency_n += 1
        else:
            bucket.failures += 1

    def stats(self, name: str, now: float | None = None) -> HealthStats:
        now = time.monotonic() if now is None else now
        buckets = self._buckets.get(name, deque())
        self._expire(buckets, now)
        ok = sum(b.successes for b in buckets)
        failed = sum(b.failures for b in buckets)
        measured = sum(b.latency_n for b in buckets)
        latency = round(sum(b.latency_sum for b in buckets) / measured, 1) if measured else None
        attempts = ok + failed
        return HealthStats(attempts=attempts, failures=failed,
                           error_rate=round(failed / attempts, 4) if attempts else 0.0, latency_ms=latency)

    def _expire(self, buckets: deque[_Bucket], now: float) -> None:
        while buckets and buckets[0].start + BUCKET_S <= now - self.window_s:
            buckets.popleft()
