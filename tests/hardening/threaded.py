"""A gateway (on the full ``config/gateway.yaml`` catalogue) and its simulator served by their own
event loop in a background thread, for synchronous tests: hypothesis drives its examples from a
plain function, and the clients here are blocking ``http.client`` calls."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from gateway.settings.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
ADMIN_KEY = "admin-hardening-key"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


@dataclass
class ThreadedGateway:
    db_path: Path
    port: int = 0
    key: str = ""
    user_token: str = ""
    app: Any = None
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _stop: Any = None
    _sim: Any = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, name="threaded-gateway", daemon=True)
        self._thread.start()
        self._run(self._serve())
        user = self.call("POST", "/admin/users", {"name": "fuzz", "quota_usd": 1000}, admin=True).json()
        self.user_token = user["user_token"]
        key = self.call("POST", "/admin/keys", {"user_id": user["id"], "name": "fuzz"}, admin=True)
        self.key = key.json()["key"]

    def _run(self, coro: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout=60)

    async def _serve(self) -> None:
        from gateway.edge.app import create_app
        from gateway_simulator import start_simulator
        from tests.conftest import serve_app

        self._sim = await start_simulator("127.0.0.1", 0)
        raw = yaml.safe_load((ROOT / "config" / "gateway.yaml").read_text())
        raw.update({"database": f"sqlite:///{self.db_path}", "admin_key": ADMIN_KEY,
                    "simulator": {"enabled": False, "port": self._sim.sim_port},
                    "logging": {"access_log": True, "level": "INFO"},
                    "listen": {"host": "127.0.0.1", "port": 0}})
        raw.setdefault("tasks", {}).update({"poll_first_s": 0.05, "poll_interval_s": 0.1})
        config = parse_config(orjson.dumps(raw).decode())
        self.app = create_app(config, load_entrypoints=False)
        self.port, self._stop = await serve_app(self.app)

    def stop(self) -> None:
        async def down() -> None:
            if self._stop is not None:
                await self._stop()
            if self._sim is not None:
                await self._sim.cleanup()

        self._run(down())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop.close()

    def call(self, method: str, path: str, body: Any = None, *, admin: bool = False, raw: bytes | None = None,
             headers: Mapping[str, str] | None = None, key: str | None = None, timeout: float = 30) -> Answer:
        all_headers = dict(headers or {})
        if admin:
            all_headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        elif key is not None:
            all_headers["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
        if data is not None:
            all_headers.setdefault("Content-Type", "application/json")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            conn.close()


@contextlib.contextmanager
def running(database: Path) -> Iterator[ThreadedGateway]:
    """A started ``ThreadedGateway`` on the SQLite file ``database``, stopped afterwards."""
    gateway = ThreadedGateway(database)
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.stop()
