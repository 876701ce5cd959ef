"""Read your writes: what each way of making a call visible at once costs, and to whom.

    .venv/bin/python -m bench.read_your_writes [--calls 200] [--database sqlite:///...]

* "queue": the request path as it is (``Meter.finish`` queues the settlement and the log row);
* "flush before the response": the request path would also wait for the commit of its row;
* "flush on read": the request path only queues; a view of the log or of the balances
  (``Meter.settled``) commits what is queued first, and that reader waits instead.

Each call reserves, finishes, and (for the third) is read back at once, one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import secrets
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import KeyRecord, Principal
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.testing import sample_log


async def _principal(storage: Storage) -> Principal:
    token_hash = hashlib.sha256(secrets.token_bytes(16)).hexdigest()
    user = await storage.create_user(f"bench-{secrets.token_hex(4)}", "default", 10**15, token_hash, "bench")
    key = await storage.create_key(KeyRecord(id=0, user_id=user.id, name="bench", masked="sk-bench",
                                             key_hash=hashlib.sha256(secrets.token_bytes(16)).hexdigest()))
    return Principal(key=key, user=user, client_ip="127.0.0.1")


def _summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return f"median {statistics.median(ordered) * 1e3:8.3f} ms   p95 {p95 * 1e3:8.3f} ms"


async def _calls(meter: Meter, principal: Principal, n: int, tag: str,
                 after: Callable[[], Awaitable[None]] | None,
                 reader: bool) -> tuple[list[float], list[float]]:
    path: list[float] = []  # what the request path spends on metering after the answer
    read: list[float] = []  # what a reader spends before its query
    for i in range(n):
        request_id = f"{tag}-{i}"
        reservation = await meter.reserve(request_id, principal, 1_000)
        start = time.perf_counter()
        meter.finish(sample_log(principal, request_id), reservation, 900)
        if after is not None:
            await after()
        path.append(time.perf_counter() - start)
        if reader:
            start = time.perf_counter()
            await meter.settled()
            read.append(time.perf_counter() - start)
    await meter.flush()
    return path, read


async def run(calls: int, database: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        storage = open_storage(database or f"sqlite:///{Path(tmp) / 'bench.db'}")
        await storage.open()
        meter = Meter(storage, "bench-ryw")
        await meter.start()
        try:
            principal = await _principal(storage)
            queued, _ = await _calls(meter, principal, calls, "queue", None, False)
            flushed, _ = await _calls(meter, principal, calls, "flush", meter.flush, False)
            on_read, reads = await _calls(meter, principal, calls, "read", None, True)
        finally:
            await meter.stop()
            await storage.close()
    print(f"{calls} calls, {storage.__class__.__name__}")
    print(f"queue (request path)                  {_summary(queued)}")
    print(f"flush before the response (req. path) {_summary(flushed)}")
    print(f"flush on read: request path           {_summary(on_read)}")
    print(f"flush on read: the reader waits       {_summary(reads)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--database", help="a database URL (default: a temporary SQLite file)")
    args = parser.parse_args()
    asyncio.run(run(args.calls, args.database))


if __name__ == "__main__":
    main()
