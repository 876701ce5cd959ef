"""Several gateway replicas on one PostgreSQL database (and one Redis), through HTTP.

1. Key changes made through one replica's admin API reach the other at once: through Redis pub/sub
   (polling switched off, so only the message can explain it) within 0.3 s, and through the
   database's auth version alone within 1.5 s.
2. A key ceiling covering exactly ten worst cases, hit by 100 concurrent calls split over two
   replicas: exactly ten are served, nothing is overspent, no balance goes negative, audit clean.
3. A replica (``gateway serve`` as a real process) is killed with SIGKILL while streaming: a
   surviving in-process replica releases the dead one's reservations (``crash_released``) within
   a few seconds, while its own streams keep their holds and settle normally.
4. Two ``gateway serve`` processes started at once on a fresh database both come up (the
   migrations run under an advisory lock).

Each test gets a PostgreSQL database of its own, dropped afterwards. Redis db 14 is handed to the
gateways; they only publish on the auth channel and store nothing, so there is nothing to flush.
With ``CI=true`` an unreachable server is a failure; otherwise these tests are skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import asyncpg
import msgspec
import openai
import orjson
import pytest
import pytest_asyncio

from gateway.accounts.auth import Authenticator, redis_channel
from gateway.accounts.metering.audit import run_audit
from gateway.settings.config import Config
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.migrations import load_migrations
from gateway.storage.testing import fresh_database, postgres_required
from tests.diagnostics import dump_database_activity
from tests.serving import free_port, spawn, stop, wait_healthy

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

pytestmark = pytest.mark.postgres

REDIS_URL = "redis://127.0.0.1:6379/14"
ADMIN_KEY = "admin-test-key"  # the conftest's
METERING = {"heartbeat_s": 0.5, "stale_after_s": 2.0}


# --- servers ---------------------------------------------------------------------------------------

@pytest_asyncio.fixture
async def pg_dsn() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for the test, dropped after it (request it before any gateway
    fixture so that the gateways stop first)."""
    async for dsn in fresh_database("gw_replicas"):
        yield dsn


async def _redis_error() -> str | None:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        await client.ping()
    except (RedisError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        await client.aclose()
    return None


async def require_redis() -> None:
    error = await _redis_error()
    if error is not None:
        if postgres_required():  # CI=true
            pytest.fail(f"CI=true but Redis is unreachable: {error}")
        pytest.skip(f"Redis is not reachable: {error}")


async def _auth_subscribers() -> int:
    """Subscribers of this deployment's auth channel (channels ignore the db: it is in the name)."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)
    try:
        return (await client.pubsub_numsub(redis_channel(REDIS_URL)))[0][1]
    finally:
        await client.aclose()


async def _opened(database: str) -> Storage:
    storage = open_storage(database)
    await storage.open()
    return storage


# --- subprocess replicas ------------------------------------------------------------------------------




def _write_config(config: Config, path: Path) -> Path:
    path.write_bytes(msgspec.json.encode(config))  # JSON is YAML
    return path


# --- 1. key changes ---------------------------------------------------------------------------------

async def _refused_within(client: openai.AsyncOpenAI, budget_s: float) -> tuple[float, int]:
    """Poll until ``client``'s key is refused with 401 invalid_api_key (fails after ``budget_s``):
    (seconds it took, answers seen before). None of those answers may be a served call: a replica
    whose cache still has the key refuses it at the reservation, which re-checks the key in the
    database (403 insufficient_quota)."""
    started = time.monotonic()
    stale = 0
    while True:
        try:
            await client.chat.completions.create(
                model="sim-chat", max_tokens=5, messages=[{"role": "user", "content": "still there?"}])
        except openai.AuthenticationError as exc:
            assert exc.status_code == 401 and exc.code == "invalid_api_key", exc
            return time.monotonic() - started, stale
        except openai.PermissionDeniedError as exc:
            assert exc.code == "insufficient_quota", exc  # cache not refreshed yet
        else:
            raise AssertionError("a call was served on a key disabled or deleted before it started")
        stale += 1
        elapsed = time.monotonic() - started
        assert elapsed < budget_s, f"still no 401 after {elapsed:.3f}s"
        await asyncio.sleep(0.005)


async def _accepted_within(client: openai.AsyncOpenAI, budget_s: float) -> float:
    started = time.monotonic()
    while True:
        try:
            await client.chat.completions.create(
                model="sim-chat", max_tokens=5, messages=[{"role": "user", "content": "back?"}])
            return time.monotonic() - started
        except openai.AuthenticationError:
            elapsed = time.monotonic() - started
            assert elapsed < budget_s, f"the re-enabled key was still refused after {elapsed:.3f}s"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("via", [pytest.param("redis", marks=pytest.mark.redis), "db-polling"])
async def test_key_changes_on_one_replica_reach_the_other(
        pg_dsn: str, gateway_server: StartGateway, make_config: MakeConfig,
        monkeypatch: pytest.MonkeyPatch, via: str, record_property: Any) -> None:
    if via == "redis":
        await require_redis()
        # Polling so slow that only the pub/sub message can explain a prompt invalidation.
        monkeypatch.setattr(Authenticator, "poll_interval_s", 3600.0)
        budget_s, config = 0.3, make_config(database=pg_dsn, redis=REDIS_URL)
        subscribers = await _auth_subscribers()
    else:
        budget_s, config = 1.5, make_config(database=pg_dsn)
    a = await gateway_server(config)
    b = await gateway_server(config)
    if via == "redis":
        # Authenticator.start() does not wait for its subscription: wait until both replicas
        # listen (there is no event to wait on for another client's subscription).
        deadline = time.monotonic() + 5
        while await _auth_subscribers() < subscribers + 2:
            assert time.monotonic() < deadline, "the replicas never subscribed to the auth channel"
            await asyncio.sleep(0.01)

    user = await a.create_user("replicated", quota_usd=10)
    key = await a.create_key(user["id"], name="shared")
    async with (openai.AsyncOpenAI(base_url=a.base_url + "/v1", api_key=key["key"], max_retries=0) as on_a,
                openai.AsyncOpenAI(base_url=b.base_url + "/v1", api_key=key["key"], max_retries=0) as on_b):
        # Created on A, usable on B with the very first call (no retry, no wait).
        answer = await on_b.chat.completions.create(
            model="sim-chat", max_tokens=5, messages=[{"role": "user", "content": "hello from B"}])
        assert answer.choices[0].message.content.startswith("[simulated]")
        await on_a.chat.completions.create(
            model="sim-chat", max_tokens=5, messages=[{"role": "user", "content": "hello from A"}])
        # Both replicas now hold the key in their caches.

        reply = await a.admin("PATCH", f"/admin/keys/{key['id']}", {"enabled": False})
        assert reply.status == 200 and reply.json()["enabled"] is False, reply.text
        with pytest.raises(openai.AuthenticationError):  # A itself: at once, in-process
            await on_a.chat.completions.create(model="sim-chat", max_tokens=5,
                                               messages=[{"role": "user", "content": "x"}])
        disabled_s, stale_disabled = await _refused_within(on_b, budget_s)

        reply = await a.admin("PATCH", f"/admin/keys/{key['id']}", {"enabled": True})
        assert reply.status == 200, reply.text
        enabled_s = await _accepted_within(on_b, budget_s)

        reply = await a.admin("DELETE", f"/admin/keys/{key['id']}")
        assert reply.status == 204, reply.text
        deleted_s, stale_deleted = await _refused_within(on_b, budget_s)
    record_property("seen_on_b_s", {"disable": round(disabled_s, 4), "enable": round(enabled_s, 4),
                                    "delete": round(deleted_s, 4)})
    print(f"[{via}] B saw: disable {disabled_s * 1000:.1f} ms ({stale_disabled} stale 403s), enable "
          f"{enabled_s * 1000:.1f} ms, delete {deleted_s * 1000:.1f} ms ({stale_deleted} stale 403s)")


# --- 2. one quota, two replicas -------------------------------------------------------------------------

CALLS = 100
FITS = 10
MAX_TOKENS = 1000
OUT_NANO = 1_500  # nano-USD per output token (1.5 USD per million); input is free
WORST_CASE_NANO = MAX_TOKENS * OUT_NANO  # exact, whatever the input estimate
QUOTA_USD = 0.015
assert round(QUOTA_USD * 10**9) == FITS * WORST_CASE_NANO


BURST_TIMEOUT_S = 60.0


def _flat_config(make_config: MakeConfig, sim_url: str, database: str, **overrides: Any) -> Config:
    """``sim-flat``: input free, output 1.5 USD/Mtok; its upstream waits 100 ms before answering,
    so that the calls overlap."""
    return make_config(
        database=database,
        extra_models=[{"id": "sim-flat", "owned_by": "simulator", "price": {"output_per_mtok": 1.5}}],
        extra_upstreams=[{"name": "up-flat", "protocol": "chat", "base_url": sim_url,
                          "api_key": "sk-sim-ttft100", "models": ["sim-flat"]}],
        **overrides)


async def _watch(storage: Storage, user_id: int, key_id: int, seen: list[tuple[int, int]]) -> None:
    while True:
        user = await storage.get_user(user_id)
        key = await storage.get_key(key_id)
        assert user is not None and key is not None
        seen.append((user.balance_nano, key.spent_nano + key.reserved_nano))
        await asyncio.sleep(0.005)


async def test_one_key_ceiling_holds_across_replicas(
        pg_dsn: str, gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> None:
    config = _flat_config(make_config, simulator.base_url, pg_dsn)
    a = await gateway_server(config)
    b = await gateway_server(config)
    user = await a.create_user("burst", quota_usd=100)
    key = await b.create_key(user["id"], name="ceiling", quota_usd=QUOTA_USD)
    marker = secrets.token_hex(8)
    body = orjson.dumps({"model": "sim-flat", "max_tokens": MAX_TOKENS, "messages": [
        {"role": "user", "content": f"sim:tokens={MAX_TOKENS} burst {marker}"}]})
    headers = {"Authorization": f"Bearer {key['key']}", "Content-Type": "application/json"}

    watcher_storage = await _opened(pg_dsn)
    samples: list[tuple[int, int]] = []
    watcher = asyncio.create_task(_watch(watcher_storage, user["id"], key["id"], samples))
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            go = asyncio.Event()

            async def one(replica: GatewayHandle) -> tuple[str, int, Any]:
                await go.wait()
                async with session.post(replica.base_url + "/v1/chat/completions", data=body,
                                        headers=headers) as resp:
                    return replica.base_url, resp.status, orjson.loads(await resp.read())

            tasks = [asyncio.create_task(one(a if i % 2 else b)) for i in range(CALLS)]
            started = time.monotonic()
            go.set()
            # Every call ends before anything is asserted (a failure then names each broken call,
            # and no request is left running into the teardown).
            try:
                async with asyncio.timeout(BURST_TIMEOUT_S):
                    ended = await asyncio.gather(*tasks, return_exceptions=True)
            except TimeoutError:
                ended = [t.result() if t.done() and not t.cancelled() else TimeoutError("no answer")
                         for t in tasks]
                await dump_database_activity()  # what a hung call waits on
            burst_s = time.monotonic() - started
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await watcher_storage.close()
    broken = [repr(e) for e in ended if isinstance(e, BaseException)]
    # (A call that waited for ever here was a leaked SDK client of an earlier test unregistering a
    # reused fd from the shared loop: see close_test_http_clients in tests/conftest.py.)
    assert not broken, f"{len(broken)} calls broke: {broken[:5]}"
    results = [e for e in ended if not isinstance(e, BaseException)]
    async with asyncio.timeout(30):
        await a.gateway.meter.flush()
        await b.gateway.meter.flush()

    statuses = Counter(status for _, status, _ in results)
    assert set(statuses) <= {200, 403}, statuses
    assert statuses[200] == FITS, statuses
    for _, status, answer in results:
        if status == 403:
            assert answer["error"]["code"] == "insufficient_quota", answer
        else:
            assert answer["usage"]["completion_tokens"] == MAX_TOKENS
    per_replica = Counter((url == a.base_url, status) for url, status, _ in results)

    storage = a.gateway.storage
    user_row = await storage.get_user(user["id"])
    key_row = await storage.get_key(key["id"])
    assert user_row is not None and key_row is not None
    quota_nano = FITS * WORST_CASE_NANO
    assert key_row.spent_nano == FITS * WORST_CASE_NANO <= quota_nano
    assert key_row.reserved_nano == 0
    assert user_row.used_nano == key_row.spent_nano
    assert user_row.balance_nano == 100 * 10**9 - key_row.spent_nano >= 0
    assert samples and all(balance >= 0 for balance, _ in samples)
    assert all(held <= quota_nano for _, held in samples), max(held for _, held in samples)
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []
    page = await storage.log_page(user["id"], 1, 100)
    assert page.total == CALLS
    assert Counter(log.outcome for log in page.items) == {"success": FITS, "client_error": CALLS - FITS}
    # The refused calls never reached the upstream.
    async with aiohttp.ClientSession() as session, session.get(simulator.base_url + "/_sim/requests") as resp:
        sim_log = await resp.json()
    assert sum(marker in orjson.dumps(r.get("body_json_or_null")).decode() for r in sim_log) == FITS
    print(f"burst of {CALLS} over 2 replicas in {burst_s:.3f}s; (on A, status): {dict(per_replica)}; "
          f"{len(samples)} balance samples")


# --- 3. a crashed replica ---------------------------------------------------------------------------------

DEAD_STREAMS = 10
OWN_STREAMS = 5
OWN_TOKENS = 200  # x 30 ms: the survivor's streams last ~6 s, longer than the release takes
RELEASE_TIMEOUT_S = 8.0  # stale_after_s (2) + a sweep period (1) + heartbeat period (0.5) + slack


def _stream_body(tokens: int) -> dict[str, Any]:
    return {"model": "sim-chat", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"sim:tokens={tokens} keep streaming"}]}


async def _open_stream(session: aiohttp.ClientSession, base_url: str, key: str, tokens: int,
                       started: asyncio.Queue[str]) -> bytes:
    """Stream a chat answer; puts the request id on ``started`` once the first chunk arrived and
    returns everything read (until the end, or until the connection breaks)."""
    async with session.post(base_url + "/v1/chat/completions", json=_stream_body(tokens),
                            headers={"Authorization": f"Bearer {key}"}) as resp:
        assert resp.status == 200, await resp.text()
        received = await resp.content.readany()
        assert received.startswith(b"data: ")
        await started.put(resp.headers["X-Service-Request-Id"])
        with contextlib.suppress(aiohttp.ClientError):
            while chunk := await resp.content.readany():
                received += chunk
        return received


def _usage_of(stream: bytes) -> dict[str, Any]:
    events = [line[6:] for line in stream.split(b"\n") if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]", events[-3:]
    payloads = [orjson.loads(e) for e in events[:-1]]
    assert not any("error" in p for p in payloads)
    usage = payloads[-1]["usage"]
    assert usage is not None
    return usage


@pytest.mark.slow
async def test_survivor_releases_a_killed_replicas_reservations(
        pg_dsn: str, gateway_server: StartGateway, make_config: MakeConfig, simulator: Any,
        tmp_path: Path) -> None:
    port = free_port()
    config = make_config(
        database=pg_dsn, listen={"host": "127.0.0.1", "port": port}, metering=METERING,
        logging={"access_log": False, "level": "WARNING"},
        models=[{"id": "sim-chat", "owned_by": "simulator",
                 "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}}],
        upstreams=[{"name": "sim-slow", "protocol": "chat", "base_url": simulator.base_url,
                    "api_key": "sk-sim-tok30", "models": ["sim-chat"]}])
    survivor = await gateway_server(config)
    balance_nano = 10 * 10**9
    user = await survivor.create_user("crash", quota_usd=10)
    key = (await survivor.create_key(user["id"], name="crash"))["key"]

    log_path = tmp_path / "doomed.log"
    doomed_url = f"http://127.0.0.1:{port}"
    proc = await spawn(_write_config(config, tmp_path / "doomed.yaml"), log_path)
    storage = survivor.gateway.storage
    try:
        await wait_healthy(proc, doomed_url, log_path)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            dead_q: asyncio.Queue[str] = asyncio.Queue()
            own_q: asyncio.Queue[str] = asyncio.Queue()
            dead_streams = [asyncio.create_task(_open_stream(session, doomed_url, key, 400, dead_q))
                            for _ in range(DEAD_STREAMS)]
            dead_ids = {await asyncio.wait_for(dead_q.get(), 10) for _ in range(DEAD_STREAMS)}
            own_streams = [
                asyncio.create_task(_open_stream(session, survivor.base_url, key, OWN_TOKENS, own_q))
                for _ in range(OWN_STREAMS)]
            own_ids = {await asyncio.wait_for(own_q.get(), 10) for _ in range(OWN_STREAMS)}

            held = await storage.open_reservations()
            assert {r.request_id for r in held} == dead_ids | own_ids
            instances = {r.instance for r in held if r.request_id in dead_ids}
            assert len(instances) == 1 and survivor.gateway.instance_id not in instances

            proc.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            assert await proc.wait() == -signal.SIGKILL
            await asyncio.gather(*dead_streams, return_exceptions=True)

            # The survivor's sweeper gives the dead replica's holds back; its own stay held.
            while dead_ids & {r.request_id for r in await storage.open_reservations()}:
                assert time.monotonic() - killed_at < RELEASE_TIMEOUT_S, "the dead replica's holds stayed"
                await asyncio.sleep(0.05)
            released_after_s = time.monotonic() - killed_at
            still_held = await storage.open_reservations()
            assert {r.request_id for r in still_held} == own_ids
            assert {r.instance for r in still_held} == {survivor.gateway.instance_id}
            assert not any(task.done() for task in own_streams), "the survivor's streams ended too soon"

            own_bodies = await asyncio.gather(*own_streams)
            own_done_after_s = time.monotonic() - killed_at
    finally:
        await stop(proc, signal.SIGKILL)

    for stream in own_bodies:
        assert _usage_of(stream)["completion_tokens"] == OWN_TOKENS
    await survivor.gateway.meter.flush()
    page = await storage.log_page(user["id"], 1, 100)
    by_id = {log.request_id: log for log in page.items}
    assert set(by_id) == dead_ids | own_ids
    for request_id in dead_ids:
        assert by_id[request_id].outcome == "crash_released"
        assert by_id[request_id].charge_nano == 0
    own_charged = 0
    for request_id in own_ids:
        log = by_id[request_id]
        assert log.outcome == "success" and log.status == 200
        assert log.completion_tokens == OWN_TOKENS and log.charge_nano > 0
        own_charged += log.charge_nano
    user_row = await storage.get_user(user["id"])
    assert user_row is not None
    assert user_row.used_nano == own_charged
    assert user_row.balance_nano == balance_nano - own_charged
    assert user_row.request_count == OWN_STREAMS  # crash releases are not counted
    assert await storage.open_reservations() == []
    assert await run_audit(storage) == []
    print(f"dead replica's {DEAD_STREAMS} holds released {released_after_s:.2f}s after SIGKILL; "
          f"survivor's {OWN_STREAMS} streams settled {own_done_after_s:.2f}s after it")


# --- 4. starting together ----------------------------------------------------------------------------

DEMO_BANNER = "First start: created the demo user"


async def _start_two_at_once(make_config: MakeConfig, database: str, tmp_path: Path) -> dict[str, Any]:
    """Launch two ``gateway serve`` processes on ``database`` at the same moment, check that both
    serve, stop them (SIGTERM, exit 0); what was seen."""
    ports = [free_port(), free_port()]
    paths = [_write_config(make_config(database=database, listen={"host": "127.0.0.1", "port": port},
                                       logging={"access_log": False, "level": "WARNING"},
                                       # the test simulator runs apart, so the demo user is asked for
                                       bootstrap={"demo_user": True}),
                           tmp_path / f"replica-{i}.yaml") for i, port in enumerate(ports)]
    logs = [tmp_path / f"replica-{i}.log" for i in range(2)]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    started = time.monotonic()
    procs = list(await asyncio.gather(*(spawn(p, log) for p, log in zip(paths, logs, strict=True))))
    try:
        await asyncio.gather(*(wait_healthy(proc, url, log)
                               for proc, url, log in zip(procs, urls, logs, strict=True)))
        up_s = time.monotonic() - started
        conn = await asyncpg.connect(database)
        try:
            versions = [r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")]
            demo_users = await conn.fetchval("SELECT COUNT(*) FROM users WHERE name = 'demo'")
        finally:
            await conn.close()
        # Both serve the same accounts: a user and key made on one work on the other.
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        chat = {"model": "sim-chat", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        async with aiohttp.ClientSession() as session:
            async with session.post(urls[0] + "/admin/users", json={"name": "both", "quota_usd": 1},
                                    headers=admin) as resp:
                assert resp.status == 201, await resp.text()
                user = await resp.json()
            async with session.post(urls[1] + "/admin/keys", json={"user_id": user["id"]},
                                    headers=admin) as resp:
                assert resp.status == 201, await resp.text()
                key = (await resp.json())["key"]
            for url in urls:
                async with session.post(url + "/v1/chat/completions", json=chat,
                                        headers={"Authorization": f"Bearer {key}"}) as resp:
                    assert resp.status == 200, await resp.text()
    finally:
        codes = await asyncio.gather(*(stop(proc) for proc in procs))
    texts = [log.read_text(errors="replace") for log in logs]
    assert codes == [0, 0], [text[-2000:] for text in texts]
    return {"up_s": up_s, "versions": sorted(versions), "demo_users": demo_users,
            "banners": sum(text.count(DEMO_BANNER) for text in texts)}


@pytest.mark.slow
async def test_two_processes_start_at_once_on_a_fresh_database(
        pg_dsn: str, make_config: MakeConfig, tmp_path: Path) -> None:
    seen = await _start_two_at_once(make_config, pg_dsn, tmp_path)
    assert seen["versions"] == [m.version for m in load_migrations()]  # each migration applied once
    print(f"both replicas healthy {seen['up_s']:.2f}s after launch; {seen}")


@pytest.mark.slow
async def test_two_processes_starting_at_once_make_one_demo_user(
        pg_dsn: str, make_config: MakeConfig, tmp_path: Path) -> None:
    seen = await _start_two_at_once(make_config, pg_dsn, tmp_path)
    assert (seen["demo_users"], seen["banners"]) == (1, 1), seen
