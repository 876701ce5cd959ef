"""The request log at scale (issue 34 point 3): fill a database with millions of request-log rows and
their roll-ups by bulk insert (not through the HTTP API), start a gateway on it and time, through
HTTP, ``/admin/logs`` with each filter, ``/admin/usage`` and the account endpoints.

    .venv/bin/python -m bench.log_rows [--rows 10000000] [--backend sqlite|postgres|both]
        [--dir /tmp/log-bench] [--keep] [--reuse]

The rows: ``--days`` (90) of traffic ending now, 200 users (a few heavy ones) with two keys each,
the five models of the default config, 93% served, the rest refusals (401 without a key, 400, 404,
429) and upstream errors (502). Roll-ups are summed while the rows are generated and written after
them, as the gateway's own transactions would have written them. Each figure is the median of
``--repeat`` (7) timed requests, after one warm-up request (their p95 and max shown too); the target
is 200 ms each.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import msgspec

from bench.procs import free_port, start_gateway
from gateway.accounts.records import KeyRecord, Outcome, RequestLog
from gateway.server.servers import DEFAULT_SERVER
from gateway.storage import open_storage
from gateway.storage.sql_request_log import LOG_FIELDS
from gateway.storage.sql_rollup import (
    SPANS,
    TOTALS_KEY,
    UPSERT_TOTALS,
    UPSERT_UPSTREAM,
    UPSERT_USAGE,
    USAGE_KEY,
    USAGE_SUMS,
    is_error,
    span_start,
)
from gateway.storage.testing import create_database, drop_database

ADMIN_KEY = "bench-admin-key"
MODELS = ("sim-chat", "sim-claude", "sim-gemini", "sim-embed", "sim-gemini-embed")
UPSTREAMS = {"sim-chat": "sim-openai", "sim-embed": "sim-openai", "sim-claude": "sim-anthropic",
             "sim-gemini": "sim-google", "sim-gemini-embed": "sim-google"}
USERS = 200
TARGET_MS = 200.0
CHUNK = 50_000
OUTCOMES: tuple[tuple[int, Outcome, str | None], ...] = (
    (200, "success", None), (400, "client_error", "invalid_request"),
    (401, "client_error", "invalid_api_key"),
    (404, "client_error", "model_not_found"), (429, "client_error", "rate_limit_exceeded"),
    (502, "upstream_error", "upstream_error"))
WEIGHTS = (93, 1, 2, 1, 2, 1)


class Accounts:
    """The users and keys the rows belong to, with the secrets the timed requests use."""

    def __init__(self) -> None:
        self.users: list[tuple[int, str]] = []  # (id, user token)
        self.keys: list[tuple[int, int, str]] = []  # (id, user id, key)


def known_accounts() -> Accounts:
    """The accounts ``make_accounts`` made in a fresh database (ids in creation order)."""
    accounts = Accounts()
    for i in range(USERS):
        accounts.users.append((i + 1, f"ut-bench{i:04d}" + "u" * 32))
        for k in range(2):
            accounts.keys.append((2 * i + k + 1, i + 1, f"sk-bench{i:04d}k{k}" + "k" * 32))
    return accounts


async def make_accounts(url: str) -> Accounts:
    storage = open_storage(url)
    await storage.open()
    accounts = Accounts()
    try:
        for i in range(USERS):
            token = f"ut-bench{i:04d}" + "u" * 32
            user = await storage.create_user(f"bench-{i}", "default", 10**15,
                                             hashlib.sha256(token.encode()).hexdigest(), f"bench-topup-{i}")
            accounts.users.append((user.id, token))
            for k in range(2):
                secret = f"sk-bench{i:04d}k{k}" + "k" * 32
                key = await storage.create_key(KeyRecord(
                    id=0, user_id=user.id, name=f"key-{k}",
                    key_hash=hashlib.sha256(secret.encode()).hexdigest(),
                    masked=f"{secret[:7]}...{secret[-4:]}"))
                accounts.keys.append((key.id, user.id, secret))
    finally:
        await storage.close()
    return accounts


def rows(accounts: Accounts, count: int, days: int, seed: int = 34) -> Iterator[RequestLog]:
    """``count`` rows, oldest first, evenly over ``days`` ending now."""
    rng = random.Random(seed)
    now = time.time()
    start = now - days * 86400
    step = (now - start) / count
    # A few heavy users: key i is picked with weight 1 / (1 + i // 8).
    key_weights = [1 / (1 + i // 8) for i in range(len(accounts.keys))]
    picks = rng.choices(range(len(accounts.keys)), key_weights, k=4096)
    outcomes = rng.choices(range(len(OUTCOMES)), WEIGHTS, k=4099)
    for n in range(count):
        key_id, user_id, _ = accounts.keys[picks[n % 4096]]
        model = MODELS[(key_id + (n & 1)) % len(MODELS)]  # each key uses two models
        status, outcome, code = OUTCOMES[outcomes[n % 4099]]
        served = status == 200
        if status == 401:
            key_id = user_id = 0
        prompt = 20 + n % 900 if served else 0
        completion = 5 + n % 300 if served else 0
        asked = status in (200, 502)  # an upstream was called
        yield RequestLog(
            request_id=f"req_bench{n:012d}", created_at=start + n * step, user_id=user_id, key_id=key_id,
            token_name="key-0" if key_id else "", route="/v1/chat/completions", family="chat", model=model,
            status=status, outcome=outcome, is_stream=bool(n % 3 == 0),
            upstream=UPSTREAMS[model] if asked else None, attempts=int(asked), prompt_tokens=prompt,
            completion_tokens=completion, cache_read_tokens=prompt // 4 if n % 5 == 0 else 0,
            charge_nano=(prompt * 500 + completion * 1500) if served else 0, use_time_ms=40 + n % 800,
            first_byte_ms=10 + n % 200 if served else None, ip="10.0.0.1", error_code=code)


class RollupSums:
    """The roll-up rows of the generated rows, as the gateway's transactions would have written
    them (``gateway.storage.sql_rollup``)."""

    def __init__(self) -> None:
        self.usage: dict[tuple[Any, ...], list[int]] = {}
        self.totals: dict[tuple[Any, ...], list[int]] = {}
        self.upstream: dict[tuple[Any, ...], list[int]] = {}

    def add(self, log: RequestLog) -> None:
        values = (1, int(log.is_stream), log.prompt_tokens, log.completion_tokens, log.cache_write_tokens,
                  log.cache_read_tokens, log.reasoning_tokens, log.charge_nano, log.uncharged_nano,
                  log.use_time_ms)
        for span in SPANS:
            begin = span_start(log.created_at, span)
            group = "default" if log.user_id else ""
            fine = (span, begin, log.user_id, log.key_id, log.model, group, log.status)
            everyone = (span, begin, log.model, group, log.status)
            for table, key in ((self.usage, fine), (self.totals, everyone)):
                sums = table.get(key)
                if sums is None:
                    table[key] = list(values)
                else:
                    for i, v in enumerate(values):
                        sums[i] += v
            if log.upstream is not None:
                up = self.upstream.setdefault((span, begin, log.upstream), [0, 0, 0, 0, 0])
                up[0] += 1
                up[1] += int(is_error(log.status))
                up[2] += log.use_time_ms
                up[3] += log.first_byte_ms or 0
                up[4] += int(log.first_byte_ms is not None)

    def usage_rows(self) -> list[tuple[Any, ...]]:
        return [(*k, *v) for k, v in sorted(self.usage.items())]

    def totals_rows(self) -> list[tuple[Any, ...]]:
        return [(*k, *v) for k, v in sorted(self.totals.items())]

    def upstream_rows(self) -> list[tuple[Any, ...]]:
        return [(*k, *v) for k, v in sorted(self.upstream.items())]


def _tuples(logs: Iterator[RequestLog], sums: RollupSums) -> Iterator[tuple[Any, ...]]:
    for log in logs:
        sums.add(log)
        yield msgspec.structs.astuple(log)  # in LOG_FIELDS order


def fill_sqlite(path: Path, accounts: Accounts, count: int, days: int) -> RollupSums:
    sums = RollupSums()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -1000000")
    insert = f"INSERT INTO request_logs ({', '.join(LOG_FIELDS)}) VALUES ({', '.join('?' * len(LOG_FIELDS))})"
    source = _tuples(rows(accounts, count, days), sums)
    written = 0
    while written < count:
        batch = [t for _, t in zip(range(CHUNK), source, strict=False)]
        if not batch:
            break
        conn.execute("BEGIN")
        conn.executemany(insert, batch)
        conn.execute("COMMIT")
        written += len(batch)
        if written % 1_000_000 == 0:
            print(f"  {written:,} rows", flush=True)
    conn.execute("BEGIN")
    conn.executemany(UPSERT_USAGE, sums.usage_rows())
    conn.executemany(UPSERT_TOTALS, sums.totals_rows())
    conn.executemany(UPSERT_UPSTREAM, sums.upstream_rows())
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sums


async def fill_postgres(dsn: str, accounts: Accounts, count: int, days: int) -> RollupSums:
    sums = RollupSums()
    conn = await asyncpg.connect(dsn)
    try:
        source = _tuples(rows(accounts, count, days), sums)
        written = 0
        while written < count:
            batch = [t for _, t in zip(range(CHUNK), source, strict=False)]
            if not batch:
                break
            await conn.copy_records_to_table("request_logs", records=batch, columns=list(LOG_FIELDS))
            written += len(batch)
            if written % 1_000_000 == 0:
                print(f"  {written:,} rows", flush=True)
        columns = (*USAGE_KEY, *USAGE_SUMS)
        await conn.copy_records_to_table("usage_rollups", records=sums.usage_rows(), columns=list(columns))
        await conn.copy_records_to_table("usage_totals", records=sums.totals_rows(),
                                         columns=[*TOTALS_KEY, *USAGE_SUMS])
        await conn.copy_records_to_table("upstream_rollups", records=sums.upstream_rows(), columns=[
            "span_s", "start_s", "upstream", "calls", "errors", "use_time_ms", "first_byte_ms",
            "first_byte_calls"])
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
    return sums


def write_config(directory: Path, database: str, port: int) -> Path:
    config = directory / "gateway.yaml"
    price = "{input_per_mtok: 0.5, output_per_mtok: 1.5}"
    models = "\n".join(f"  - {{id: {m}, price: {price}}}" for m in MODELS)
    config.write_text(f"""listen: {{host: 127.0.0.1, port: {port}}}
database: {database}
admin_key: {ADMIN_KEY}
simulator: {{enabled: false}}
logging: {{access_log: false, level: WARNING}}
logs: {{retain_days: 0}}
models:
{models}
upstreams:
  - {{name: sim-openai, protocol: chat, base_url: "http://127.0.0.1:9", models: [sim-chat, sim-embed]}}
  - {{name: sim-anthropic, protocol: messages, base_url: "http://127.0.0.1:9", models: [sim-claude]}}
  - {{name: sim-google, protocol: v1beta, base_url: "http://127.0.0.1:9",
     models: [sim-gemini, sim-gemini-embed]}}
""")
    return config


def probes(accounts: Accounts, now: int) -> list[tuple[str, str, str]]:
    """(name, path, credential) of every timed request: the heaviest user and key (the first)."""
    user_id, token = accounts.users[0]
    key_id, _, secret = accounts.keys[0]
    day, month = 86400, 30 * 86400
    return [
        ("/admin/logs", "/admin/logs", ADMIN_KEY),
        ("/admin/logs user_id", f"/admin/logs?user_id={user_id}", ADMIN_KEY),
        ("/admin/logs key_id", f"/admin/logs?key_id={key_id}", ADMIN_KEY),
        ("/admin/logs model", "/admin/logs?model=sim-claude", ADMIN_KEY),
        ("/admin/logs status=429", "/admin/logs?status=429", ADMIN_KEY),
        ("/admin/logs status=401", "/admin/logs?status=401", ADMIN_KEY),
        ("/admin/logs request_id", "/admin/logs?request_id=req_bench000004000000", ADMIN_KEY),
        ("/admin/logs since+until", f"/admin/logs?since={now - 3 * day - 1234}&until={now - day + 777}",
         ADMIN_KEY),
        ("/admin/logs all filters", f"/admin/logs?user_id={user_id}&key_id={key_id}&model=sim-claude"
                                    f"&status=200&since={now - month}&until={now - day}", ADMIN_KEY),
        ("/admin/logs page 500", "/admin/logs?page=500&page_size=20", ADMIN_KEY),
        ("/admin/logs before (page 501)", "/admin/logs?page_size=20&before={before}", ADMIN_KEY),
        ("/admin/usage day by model 30 d", "/admin/usage?bucket=day&group_by=model", ADMIN_KEY),
        ("/admin/usage hour by user 24 h", "/admin/usage?bucket=hour&group_by=user", ADMIN_KEY),
        ("/admin/usage hour by user 24 h, top=0", "/admin/usage?bucket=hour&group_by=user&top=0", ADMIN_KEY),
        ("/admin/usage month by group", f"/admin/usage?bucket=month&group_by=group&since={now - 365 * day}",
         ADMIN_KEY),
        ("/admin/usage day by upstream", "/admin/usage?bucket=day&group_by=upstream", ADMIN_KEY),
        ("/admin/usage day by key, one user", f"/admin/usage?bucket=day&group_by=key&user_id={user_id}",
         ADMIN_KEY),
        ("/api/log/self", "/api/log/self?page=1&page_size=20", token),
        ("/api/log/self page 200", "/api/log/self?page=200&page_size=100", token),
        ("/api/log/self before (page 201)", "/api/log/self?page_size=100&before={before}", token),
        ("/api/user/self", "/api/user/self", token),
        ("/v1/dashboard/billing/usage 100 d",
         f"/v1/dashboard/billing/usage?start_date={time.strftime('%Y-%m-%d', time.gmtime(now - 99 * day))}"
         f"&end_date={time.strftime('%Y-%m-%d', time.gmtime(now + day))}", secret),
        ("/v1/dashboard/billing/subscription", "/v1/dashboard/billing/subscription", secret),
    ]


Timing = tuple[str, float, float, float, int]  # name, median, p95, max (ms), status


async def measure(base: str, accounts: Accounts, repeat: int) -> list[Timing]:
    """Each probe ``repeat`` times after a warm-up; a ``{before}`` in a path is the ``next_before``
    of the probe before it (a keyset page right after that offset page)."""
    results = []
    before: int | None = None
    async with aiohttp.ClientSession() as session:
        for name, path, credential in probes(accounts, int(time.time())):
            headers = {"Authorization": f"Bearer {credential}"}
            url = base + path.replace("{before}", str(before))
            timings = []
            status = 0
            for i in range(repeat + 1):
                began = time.perf_counter()
                async with session.get(url, headers=headers) as reply:
                    body = await reply.read()
                    status = reply.status
                if i:  # the first is a warm-up
                    timings.append((time.perf_counter() - began) * 1000)
            answer = msgspec.json.decode(body) if status == 200 else {}
            data = answer.get("data")  # /api/log/self wraps its page in data
            before = (data if isinstance(data, dict) else answer).get("next_before")
            p95 = (statistics.quantiles(timings, n=20, method="inclusive")[18] if len(timings) > 1
                   else timings[0])
            results.append((name, statistics.median(timings), p95, max(timings), status))
    return results


def report(backend: str, rows_count: int, results: list[Timing]) -> str:
    lines = [f"\n{backend}, {rows_count:,} rows: median / p95 / max of the timed requests (ms)",
             f"{'request':42} {'median':>8} {'p95':>8} {'max':>8}  status"]
    for name, median, p95, worst, status in results:
        flag = "  FAILED" if status != 200 else "" if median < TARGET_MS else "  OVER TARGET"
        lines.append(f"{name:42} {median:8.1f} {p95:8.1f} {worst:8.1f}  {status}{flag}")
    return "\n".join(lines)


async def run(backend: str, args: argparse.Namespace) -> str:
    directory = Path(args.dir) / backend
    directory.mkdir(parents=True, exist_ok=True)
    dsn = None
    if backend == "sqlite":
        db = directory / "gateway.db"
        url = f"sqlite:///{db}"
        if args.reuse and db.exists():  # measure again what an earlier run filled
            return await _measure_on(backend, directory, url, known_accounts(), args, "reused")
        for leftover in directory.glob("gateway.db*"):
            leftover.unlink()
    else:
        dsn = await create_database("gw_log_bench")
        url = dsn
    try:
        began = time.perf_counter()
        accounts = await make_accounts(url)
        print(f"{backend}: filling {args.rows:,} rows over {args.days} days", flush=True)
        if backend == "sqlite":
            sums = fill_sqlite(db, accounts, args.rows, args.days)
        else:
            assert dsn is not None
            sums = await fill_postgres(dsn, accounts, args.rows, args.days)
        filled = time.perf_counter() - began
        print(f"{backend}: filled in {filled:.0f} s ({len(sums.usage):,} usage roll-up rows)", flush=True)
        return await _measure_on(backend, directory, url, accounts, args,
                                 f"fill: {filled:.0f} s, {len(sums.usage):,} roll-up rows")
    finally:
        if dsn is not None and not args.keep:
            await drop_database(dsn)


async def _measure_on(backend: str, directory: Path, url: str, accounts: Accounts,
                      args: argparse.Namespace, note: str) -> str:
    port = free_port()
    config = write_config(directory, url, port)
    proc = start_gateway(config, port, args.server, directory / "gateway.log")
    try:
        results = await measure(f"http://127.0.0.1:{port}", accounts, args.repeat)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return report(backend, args.rows, results) + f"\n({note})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--dir", default="/tmp/log-bench")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--server", default=DEFAULT_SERVER, help="ASGI server of the gateway")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    parser.add_argument("--reuse", action="store_true",
                        help="SQLite: measure the database an earlier run filled in --dir again")
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    reports = [asyncio.run(run(backend, args)) for backend in backends]
    print("\n".join(reports))
    failed = any("OVER TARGET" in r or "FAILED" in r for r in reports)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
