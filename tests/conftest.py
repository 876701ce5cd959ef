"""Fixtures shared by every test folder.

* ``simulator`` (session): the upstream simulator in this process on an ephemeral port.
* ``make_config`` (function): builds a test ``Config`` whose upstreams point at the simulator.
* ``gateway_server`` (function): starts real gateways (the default server of ``gateway serve``, see
  tests/servers/embedded.py, on a random loopback port, in the
  test's event loop) and stops them after the test.
* ``gw`` (function): a running gateway on the default test config with a user and an API key.

All async fixtures run on the session event loop (see ``pyproject.toml``). Nothing sleeps except
while polling for readiness.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import contextlib
import functools
import importlib
import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import hypothesis  # noqa: F401  (see below)
import orjson
import pytest
import pytest_asyncio
import trustme
from multidict import CIMultiDictProxy
from starlette.applications import Starlette

from gateway.runtime.context import Gateway
from gateway.runtime.tuning import without_gc_pauses
from gateway.settings.config import Config, parse_config
from gateway.storage import open_storage
from tests.diagnostics import dump_database_activity

# hypothesis is imported above, at collection, on purpose: otherwise a run of test folders that do
# not use it imports it from its pytest plugin's end-of-session summary, and CPython 3.11.7's
# ast.parse (pytest's assertion rewrite) can then fail with "SystemError: AST constructor recursion
# depth mismatch" when a garbage collection runs finalizers in the middle of it.
ADMIN_KEY = "admin-test-key"
STARTUP_TIMEOUT_S = 10.0


def parse_python(source: str) -> ast.Module:
    """``ast.parse`` with the garbage collector paused, for the tests that read the code: the same
    CPython 3.11.7 fault (a collection running finalizers mid-parse) otherwise fails a parse now and
    then with "SystemError: AST constructor recursion depth mismatch" (seen in CI)."""
    return without_gc_pauses(lambda: ast.parse(source))


# Each SDK client (httpx) loads the CA bundle named by SSL_CERT_FILE (or the system's) when it is
# made: about 25 ms of CPU, in hundreds of clients. No test reaches a public TLS server, so the
# suite's processes trust one CA of their own instead (a test that serves TLS sets its own CA the
# same way, for the process that needs it).
_SCRATCH_DIR = tempfile.mkdtemp(prefix="gateway-tests-")
atexit.register(shutil.rmtree, _SCRATCH_DIR, True)
trustme.CA().cert_pem.write_to_path(os.path.join(_SCRATCH_DIR, "ca.pem"))
os.environ["SSL_CERT_FILE"] = os.path.join(_SCRATCH_DIR, "ca.pem")


# --- parallel workers (``make test`` runs pytest-xdist with ``--dist loadgroup``) ----------------------
# Each worker has its own event loop, simulator, temporary directories and random ports, and every
# PostgreSQL test its own database (gateway.storage.testing.fresh_database). The machine's Redis
# is the one thing they would share: its pub/sub channels ignore the db number and some tests count
# a channel's subscribers, so every test that talks to it runs in one group, on one worker, in turn.


def _uses_machine_redis(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    return (item.get_closest_marker("redis") is not None or "redis_url" in getattr(item, "fixturenames", ())
            or hasattr(module, "REDIS_URL"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if _uses_machine_redis(item):
            item.add_marker(pytest.mark.xdist_group("machine-redis"))


# --- the simulator -------------------------------------------------------------------------------

@dataclass(frozen=True)
class SimulatorHandle:
    port: int
    base_url: str  # http://127.0.0.1:<port>, the origin upstream configs use


@pytest_asyncio.fixture(scope="session")
async def simulator() -> AsyncIterator[SimulatorHandle]:
    """One in-process upstream simulator for the whole session (skips when not importable)."""
    sim = pytest.importorskip("gateway_simulator")
    runner = await sim.start_simulator("127.0.0.1", 0)
    yield SimulatorHandle(runner.sim_port, f"http://127.0.0.1:{runner.sim_port}")
    await runner.cleanup()


# --- hang diagnosis ---------------------------------------------------------------------------------
# pytest-timeout (pyproject.toml) ends a test that hangs, printing each thread's stack; on the shared
# event loop that shows only the loop waiting. This watchdog, a task on that loop, prints every
# asyncio task's stack first, which names what the test is waiting on.
HANG_DUMP_AFTER_S = 120.0
_running: dict[str, Any] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _running.update(nodeid=item.nodeid, since=time.monotonic(), dumped=False)
    try:
        return (yield)
    finally:
        _running.clear()


def _awaiting(coro: Any) -> list[str]:
    """Where a suspended coroutine stands, down its chain of awaits (a task's own stack shows only
    its outermost frame)."""
    lines: list[str] = []
    while coro is not None:
        frame = next((f for a in ("cr_frame", "gi_frame", "ag_frame") if (f := getattr(coro, a, None))), None)
        if frame is not None:
            lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        coro = next((c for a in ("cr_await", "gi_yieldfrom", "ag_await")
                     if (c := getattr(coro, a, None))), None)
    return lines


def _dump_tasks(nodeid: str) -> None:
    out = sys.__stderr__
    print(f"\n=== {nodeid} has run {HANG_DUMP_AFTER_S:g}s: every asyncio task ===", file=out)
    for task in asyncio.all_tasks():
        print(f"--- {task.get_name()}", file=out)
        for line in _awaiting(task.get_coro()):
            print(f"    {line}", file=out)
    if out is not None:
        out.flush()


@pytest_asyncio.fixture(scope="session", autouse=True)
async def hang_watchdog() -> AsyncIterator[None]:
    async def watch() -> None:
        while True:
            await asyncio.sleep(1.0)
            since = _running.get("since")
            if since is not None and not _running["dumped"] and time.monotonic() - since > HANG_DUMP_AFTER_S:
                _running["dumped"] = True
                _dump_tasks(_running["nodeid"])
                await dump_database_activity()

    task = asyncio.create_task(watch(), name="hang-watchdog")
    yield
    task.cancel()


# --- HTTP clients of a test ------------------------------------------------------------------------
# Every test shares one event loop. An SDK client (openai, anthropic, google-genai and ollama all sit
# on httpx) that a test drops without closing is collected later by the cyclic garbage collector,
# in the middle of whatever runs then: the collector's finalizers close its sockets behind asyncio's
# back, and the openai and anthropic clients' own finalizers schedule ``aclose`` on the loop, whose
# abort of each stale transport unregisters that fd from the loop, by then often the fd of a new
# socket (a PostgreSQL connection, a gateway's client connection), which then waits for ever. That
# was the replicas ceiling test's flake (a hundred such stale aborts in tests/relay and tests/core
# alone). So every client made on the loop during a test is kept alive until the test ends and then
# closed on the loop, while its sockets are still its own.
_test_clients: list[tuple[Any, asyncio.AbstractEventLoop]] = []


def _keep_clients_of(client_class: Any) -> None:
    """Make every ``client_class`` made on a running loop a client of the running test."""
    original = client_class.__init__

    def kept_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        with contextlib.suppress(RuntimeError):  # made outside any running loop: nothing to keep
            _test_clients.append((self, asyncio.get_running_loop()))

    client_class.__init__ = kept_init


# httpx, and httpx2, the fork the openai and anthropic SDKs are built on.
for _module in ("httpx", "httpx2"):
    with contextlib.suppress(ImportError):
        _keep_clients_of(importlib.import_module(_module).AsyncClient)


@pytest_asyncio.fixture(autouse=True)
async def close_test_http_clients() -> AsyncIterator[None]:
    yield
    loop = asyncio.get_running_loop()
    clients = [client for client, made_on in _test_clients if made_on is loop]  # not another thread's
    _test_clients.clear()
    for client in clients:
        if not client.is_closed:
            with contextlib.suppress(Exception):
                await client.aclose()


# --- configs -------------------------------------------------------------------------------------

DEFAULT_MODELS: list[dict[str, Any]] = [
    {"id": "sim-chat", "owned_by": "simulator", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}},
    {"id": "sim-claude", "owned_by": "simulator",
     "price": {"input_per_mtok": 3, "output_per_mtok": 15, "cache_write_per_mtok": 3.75,
               "cache_read_per_mtok": 0.3}},
    {"id": "sim-gemini", "owned_by": "simulator", "price": {"input_per_mtok": 0.3, "output_per_mtok": 2.5}},
    {"id": "sim-embed", "owned_by": "simulator", "price": {"input_per_mtok": 0.02}},
    {"id": "sim-gemini-embed", "owned_by": "simulator", "price": {"input_per_mtok": 0.15}},
]


def default_upstreams(base_url: str, api_key: str = "sk-sim") -> list[dict[str, Any]]:
    """The three upstreams of ``config/gateway.yaml``, pointed at ``base_url``."""
    return [
        {"name": "sim-openai", "protocol": "chat", "base_url": base_url, "api_key": api_key,
         "models": ["sim-chat", "sim-embed"]},
        {"name": "sim-anthropic", "protocol": "messages", "base_url": base_url, "api_key": api_key,
         "models": ["sim-claude"]},
        {"name": "sim-google", "protocol": "v1beta", "base_url": base_url, "api_key": api_key,
         "models": ["sim-gemini", "sim-gemini-embed"]},
    ]


def base_config_dict(sim_base_url: str, db_path: Path) -> dict[str, Any]:
    """The default test config as plain data (what a YAML file would hold)."""
    return {
        "database": f"sqlite:///{db_path}",
        "admin_key": ADMIN_KEY,
        "simulator": {"enabled": False},
        "logging": {"access_log": True, "level": "INFO"},
        "models": [dict(m) for m in DEFAULT_MODELS],
        "upstreams": default_upstreams(sim_base_url),
        # Redis commands get 2 s, not 0.25: several replicas in one test share an event loop on a
        # machine running four test workers, and a reply read late there was taken for an outage
        # (the limit then "allow"s: 16 of 30 served at rpm 10). Tests of the timeout set their own.
        "ratelimit": {"redis_timeout_s": 2.0},
    }



MakeConfig = Callable[..., Config]


@functools.cache
def _migrated_sqlite() -> Path:
    """An empty SQLite database with every migration applied, made once per test process: each
    test's default database starts as a copy (3 ms of CPU to open) instead of migrating a new file
    (13 ms, in about 1,800 gateways). Tests of migrations use databases of their own."""
    path = Path(_SCRATCH_DIR) / "migrated.db"

    async def migrate() -> None:
        storage = open_storage(f"sqlite:///{path}")
        await storage.open()
        await storage.close()

    # In a thread of its own: this runs in a fixture's setup, on the session loop's thread.
    thread = threading.Thread(target=asyncio.run, args=(migrate(),))
    thread.start()
    thread.join()
    assert path.exists()
    return path


@pytest.fixture
def make_config(tmp_path: Path, simulator: SimulatorHandle) -> MakeConfig:
    """``make_config(**overrides, extra_models=[...], extra_upstreams=[...]) -> Config``.

    Defaults: the five ``sim-*`` models and three upstreams of the default config pointed at the
    session simulator, SQLite at ``tmp_path/gateway.db``, admin key ``"admin-test-key"``, the
    simulator child disabled. ``overrides`` replace top-level keys wholesale with plain data
    (``limits={"json_body_bytes": 1000}``); ``extra_*`` append to the defaults (e.g. a second chat
    upstream ``{"name": "sim-openai-b", "protocol": "chat", "priority": 1, ...}`` for failover).
    The result goes through ``parse_config``, so it is validated exactly like a file."""

    def build(*, extra_models: Iterable[Mapping[str, Any]] = (),
              extra_upstreams: Iterable[Mapping[str, Any]] = (), **overrides: Any) -> Config:
        db_path = tmp_path / "gateway.db"
        raw = base_config_dict(simulator.base_url, db_path)
        raw.update(overrides)
        raw["models"] = [*raw["models"], *map(dict, extra_models)]
        raw["upstreams"] = [*raw["upstreams"], *map(dict, extra_upstreams)]
        if raw["database"] == f"sqlite:///{db_path}" and not db_path.exists():
            shutil.copyfile(_migrated_sqlite(), db_path)
        return parse_config(orjson.dumps(raw).decode())  # JSON is YAML

    return build


# --- running gateways ----------------------------------------------------------------------------

@dataclass
class Reply:
    """A fully read HTTP response."""

    status: int
    headers: CIMultiDictProxy[str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


@dataclass
class GatewayHandle:
    """A gateway served over real HTTP. ``gateway`` is the live Gateway object (storage, auth,
    meter...) of the app; ``http`` a client session for the test's own calls."""

    base_url: str
    app: Starlette
    http: aiohttp.ClientSession
    _stop: Callable[[], Awaitable[None]]
    # Set by the ``gw`` fixture only:
    user: dict[str, Any] = field(default_factory=dict)
    key_record: dict[str, Any] = field(default_factory=dict)

    @property
    def gateway(self) -> Gateway:
        return self.app.state.gateway

    @property
    def key(self) -> str:
        """The full API key made by ``gw``."""
        return self.key_record["key"]

    @property
    def user_token(self) -> str:
        return self.user["user_token"]

    async def request(self, method: str, path: str, *, json: Any = None, data: Any = None,
                      headers: Mapping[str, str] | None = None, params: Mapping[str, str] | None = None,
                      key: str | None = None) -> Reply:
        """Any call; ``key`` adds ``Authorization: Bearer <key>``."""
        all_headers = dict(headers or {})
        if key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        body = orjson.dumps(json) if json is not None else data
        if json is not None:
            all_headers.setdefault("Content-Type", "application/json")
        async with self.http.request(method, self.base_url + path, data=body, headers=all_headers,
                                     params=params) as resp:
            return Reply(resp.status, resp.headers, await resp.read())

    async def admin(self, method: str, path: str, json: Any = None, *, admin_key: str = ADMIN_KEY) -> Reply:
        """A call to the admin API with the test admin key."""
        return await self.request(method, path, json=json, headers={"Authorization": f"Bearer {admin_key}"})

    async def create_user(self, name: str | None = None, quota_usd: float = 100,
                          group: str = "default") -> dict[str, Any]:
        """``POST /admin/users``; the answer includes ``user_token``. Names are unique: without
        one, a fresh name is made."""
        body = {"name": name or f"u-{secrets.token_hex(4)}", "quota_usd": quota_usd, "group": group}
        reply = await self.admin("POST", "/admin/users", body)
        assert reply.status == 201, reply.text
        return reply.json()

    async def create_key(self, user_id: int, **fields: Any) -> dict[str, Any]:
        """``POST /admin/keys``; the answer includes the full ``key``."""
        reply = await self.admin("POST", "/admin/keys", {"user_id": user_id, **fields})
        assert reply.status == 201, reply.text
        return reply.json()

    async def stop(self) -> None:
        """Graceful shutdown now (also done at teardown; a second call does nothing)."""
        await self._stop()


StartGateway = Callable[..., Awaitable[GatewayHandle]]


async def serve_app(app: Starlette) -> tuple[int, Callable[[], Awaitable[None]]]:
    """Serve ``app`` on 127.0.0.1:<random port> in this event loop, on the server tests/servers/
    embedded.py picks (``gateway serve``'s default unless GATEWAY_TEST_SERVER says otherwise);
    returns the port (once the lifespan has started and the socket accepts) and an idempotent stop."""
    from tests.servers import embedded

    port, task, ask_stop = embedded.start(app)

    async def stop() -> None:
        await embedded.stop(task, ask_stop)

    async with aiohttp.ClientSession() as probe:
        deadline = asyncio.get_running_loop().time() + STARTUP_TIMEOUT_S
        while True:
            if task.done():
                task.result()  # raises the start-up error
                raise RuntimeError("the gateway stopped during start-up")
            with contextlib.suppress(aiohttp.ClientError):
                async with probe.get(f"http://127.0.0.1:{port}/healthz") as resp:
                    if resp.status == 200:
                        break
            if asyncio.get_running_loop().time() > deadline:
                await stop()
                raise TimeoutError("the gateway did not become healthy")
            await asyncio.sleep(0.005)
    return port, stop


@pytest_asyncio.fixture
async def gateway_server(make_config: MakeConfig) -> AsyncIterator[StartGateway]:
    """``await gateway_server(config=None, *, extra_plugins=(), load_entrypoints=False)`` starts a
    gateway (default: ``make_config()``) and returns its GatewayHandle; every gateway started is
    stopped gracefully at teardown. Entry-point plugins are off unless asked for, so that whatever
    is installed in the venv cannot change a test."""
    from gateway.edge.app import create_app

    handles: list[GatewayHandle] = []

    async def start(config: Config | None = None, *, extra_plugins: Iterable[object] = (),
                    load_entrypoints: bool = False) -> GatewayHandle:
        app = create_app(config or make_config(), extra_plugins=tuple(extra_plugins),
                         load_entrypoints=load_entrypoints)
        port, stop_server = await serve_app(app)
        session = aiohttp.ClientSession()
        stopped = False

        async def stop() -> None:
            nonlocal stopped
            if not stopped:
                stopped = True
                # The test's client goes first, as clients do: a server stopping gracefully waits
                # for connections still open (granian: one an upload left mid-body, about 35 s).
                await session.close()
                await stop_server()

        handle = GatewayHandle(f"http://127.0.0.1:{port}", app, session, stop)
        handles.append(handle)
        return handle

    yield start
    for handle in reversed(handles):
        await handle.stop()


@pytest_asyncio.fixture
async def gw(gateway_server: StartGateway) -> GatewayHandle:
    """A gateway on the default test config with user ``u`` ($100) and one unrestricted key:
    ``gw.key`` (full API key), ``gw.user_token``, ``gw.user`` and ``gw.key_record`` (admin API
    answers)."""
    handle = await gateway_server()
    handle.user = await handle.create_user("u", quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="test")
    return handle
