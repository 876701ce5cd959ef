"""The ASGI servers ``gateway serve --server NAME`` can run the app on, each stock and configured
through its public options only (``gateway.server.options``).

Each runner takes an application factory given as an import string (``module:function``, called
once per worker process, or once in this process with one worker) and serves it until SIGINT or
SIGTERM, letting in-flight requests finish within ``graceful_s``. The same runners serve the
benchmark's reference floor (``bench/floor.py``), so that both are measured on the same server.

- ``granian`` (the default): a Rust HTTP server (hyper), served HTTP/1.1-only. Measured, it is the
  only one of the three that, stock, enforces both a request-head size limit on every head
  (``431``, ``limits.request_head_bytes``) and a request-head deadline
  (``limits.header_timeout_s``), and it closes the connection after a request that has both
  Content-Length and Transfer-Encoding (the others serve what follows it: request smuggling
  behind a proxy). Its parent process supervises the worker processes, even with one worker.
- ``uvicorn`` (``pip install 'model-gateway[uvicorn]'``): served with its ``h11`` parser, the one
  that bounds a head (``400`` over it; a head that arrives whole in one read is not checked). It
  has no head deadline: a client that sends its first head slowly, or never, holds its connection
  for ever (an idle keep-alive connection is closed). One worker runs in this process, several
  under uvicorn's supervisor.
- ``hypercorn`` (``pip install 'model-gateway[hypercorn]'``): the one that speaks HTTP/2 (over TLS
  and as h2c on plain TCP); it enforces the head deadline (its keep-alive timeout) and a head size
  (``431``; as uvicorn's, not checked for a head that arrives whole in one read). One worker runs
  in this process.

uvicorn and hypercorn are optional extras: they are imported only when chosen.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.runtime.tuning import die_with_parent
from gateway.runtime.workers import signal_workers
from gateway.server.options import GRANIAN_HTTP, granian_http1, hypercorn_config, uvicorn_options
from gateway.server.options import ServerLimits as ServerLimits

log = logging.getLogger("gateway.server.serve")

DEFAULT_SERVER = "granian"
SERVERS = ("granian", "uvicorn", "hypercorn")
# Where the workers share their metrics (prometheus_client's multiprocess mode: plugins/metrics_workers.py).
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
FACTORY_ENV = "GATEWAY_SERVER_FACTORY"  # the real factory, for worker_factory in worker processes


@dataclass(frozen=True)
class Listen:
    host: str
    port: int
    workers: int = 1
    graceful_s: float = 10.0
    limits: ServerLimits = field(default_factory=ServerLimits)
    backlog: int = 4096  # listen.backlog


def netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def load_factory(target: str) -> Callable[[], Any]:
    module, _, name = target.partition(":")
    factory: Callable[[], Any] = getattr(importlib.import_module(module), name)
    return factory


def worker_factory() -> Any:
    """The factory a worker process calls: it first asks Linux to SIGKILL it when its supervisor
    dies, so that a ``gateway serve`` killed with SIGKILL leaves no worker behind still serving
    (and settling) as if nothing had happened; a crash stays a crash, which the money rules
    recover from (released holds, ``gateway audit``)."""
    die_with_parent(signal.SIGKILL)
    return load_factory(os.environ[FACTORY_ENV])()


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (it is a dependency on Linux): a faster event loop for the
    server and its upstream client alike; the standard loop otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def not_installed(server: str) -> str | None:
    """Why ``server`` cannot run here (an optional extra that is not installed); None when it can."""
    if importlib.util.find_spec(server) is not None:
        return None
    return f"the {server} server is not installed: pip install 'model-gateway[{server}]'"


def run(server: str, factory: str, listen: Listen) -> int:
    """Serve until stopped; OSError(EADDRINUSE) when the port is taken."""
    runners: dict[str, Callable[[str, Listen], int]] = {
        "granian": _granian, "uvicorn": _uvicorn, "hypercorn": _hypercorn}
    if server not in runners:
        raise ValueError(f"unknown server {server!r} (choose from {', '.join(SERVERS)})")
    if (missing := not_installed(server)) is not None:
        raise ModuleNotFoundError(missing)
    # Granian binds in its worker processes and uvicorn logs a bind failure instead of raising:
    # probe the port here first, so that every server reports a taken port the same way.
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((listen.host, listen.port))
    if server == "granian" or listen.workers > 1:  # the app runs in worker processes
        os.environ[FACTORY_ENV] = factory
        factory = "gateway.server.servers:worker_factory"
    if listen.workers <= 1:  # one process: its metrics stay in its memory
        os.environ.pop(METRICS_DIR_ENV, None)
        return runners[server](factory, listen)
    # A scrape reaches one worker; every worker's series are kept in a directory of this server's
    # own, new and empty (a directory reused from an earlier run would add its counts to this one's).
    shared = tempfile.mkdtemp(prefix="gateway-metrics-")
    os.environ[METRICS_DIR_ENV] = shared
    try:
        return runners[server](factory, listen)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _granian(factory: str, listen: Listen) -> int:
    from granian import Granian
    from granian.constants import Interfaces, Loops

    loop = Loops.uvloop if event_loop_factory() is not None else Loops.asyncio
    server = Granian(factory, address=listen.host, port=listen.port, interface=Interfaces.ASGI, factory=True,
                     workers=max(listen.workers, 1), loop=loop, websockets=False,
                     http=GRANIAN_HTTP, http1_settings=granian_http1(listen.limits),
                     backlog=listen.backlog, backpressure=listen.backlog,
                     log_access=False, workers_kill_timeout=int(listen.graceful_s) or 1,
                     respawn_failed_workers=True)
    server.on_startup(_sighup_reloads_the_workers)
    server.serve()
    return 0


def _sighup_reloads_the_workers() -> None:
    """granian's own SIGHUP respawns its workers (streams in flight cut after the grace): from its
    ``on_startup`` hook, which runs once its handlers are set, SIGHUP is passed to the workers
    instead, each of which reloads the config in place (``gateway.runtime.reload``)."""
    signal.signal(signal.SIGHUP, lambda _sig, _frame: signal_workers())


def _uvicorn(factory: str, listen: Listen) -> int:
    import uvicorn

    loop = "uvloop" if event_loop_factory() is not None else "asyncio"
    common: dict[str, Any] = {
        "host": listen.host, "port": listen.port, "loop": loop, "ws": "none", "backlog": listen.backlog,
        **uvicorn_options(listen.limits),
        "lifespan": "on", "access_log": False, "log_config": None, "server_header": False,
        # The gateway reads X-Forwarded-For itself, from its configured trusted_proxies only; uvicorn's
        # own middleware would rewrite the client address first (trusting loopback) on every request.
        "proxy_headers": False,
        "timeout_graceful_shutdown": int(listen.graceful_s)}
    if listen.workers > 1:
        uvicorn.run(factory, factory=True, workers=listen.workers, **common)
        return 0
    server = uvicorn.Server(uvicorn.Config(load_factory(factory)(), **common))
    # uvicorn re-raises the stop signal once it has shut down, to the handler it found: a no-op
    # here, so that a graceful stop ends with exit code 0 as with the other servers.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run()
    return 0 if server.started else 1


def _hypercorn(factory: str, listen: Listen) -> int:
    hyper = hypercorn_config(listen.limits)
    hyper.bind = [netloc(listen.host, listen.port)]
    hyper.backlog = listen.backlog
    hyper.workers = max(listen.workers, 1)
    hyper.graceful_timeout = listen.graceful_s
    hyper.accesslog = None  # ours is the JSON access log middleware
    hyper.errorlog = logging.getLogger("hypercorn.error")  # through our handlers, once
    if listen.workers <= 1:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(_hypercorn_here(load_factory(factory)(), hyper))
        return 0
    from hypercorn.run import run as hypercorn_run

    hyper.application_path = f"{factory}()"
    if event_loop_factory() is not None:
        hyper.worker_class = "uvloop"
    return hypercorn_run(hyper)


async def _hypercorn_here(app: Any, hyper: Any) -> None:
    from hypercorn.asyncio import serve as hypercorn_serve

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await hypercorn_serve(app, hyper, shutdown_trigger=stop.wait)
