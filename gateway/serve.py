"""``gateway serve``: bootstrap once, start the simulator child, serve with hypercorn, shut down
gracefully (in-flight requests finish, then the lifespan stops the Meter, pool and storage).

With ``--workers N`` hypercorn spawns N processes, each importing ``gateway.serve:worker_app()``,
which reads the config path from ``GATEWAY_CONFIG``; migrations and the demo user are done before,
here in the parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from hypercorn.config import Config as HypercornConfig
from starlette.applications import Starlette

from gateway.config import Config, ConfigError, SimulatorConfig, load_config

CONFIG_ENV = "GATEWAY_CONFIG"
GRACEFUL_TIMEOUT_S = 10.0
SIMULATOR_START_TIMEOUT_S = 20.0

log = logging.getLogger("gateway.serve")


def configure_logging(config: Config) -> None:
    """Logs to stderr; access lines are bare JSON (one object per line) for log shippers."""
    level = logging.getLevelNamesMapping().get(config.logging.level.upper(), logging.INFO)
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    root.setLevel(level)
    access = logging.getLogger("gateway.access")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
        access.propagate = False


def worker_app() -> Starlette:
    """The app factory each hypercorn worker process calls."""
    from gateway.app import create_app

    config = load_config(os.environ[CONFIG_ENV])
    configure_logging(config)
    return create_app(config)


def serve(config_path: str, host: str | None = None, port: int | None = None, workers: int = 1) -> int:
    from gateway.bootstrap import bootstrap, demo_banner
    from gateway.cli import print_config_errors
    from gateway.plugins import collect_adapters, make_plugin_manager

    try:  # an upstream protocol no installed adapter speaks is refused here, before anything starts
        config = load_config(config_path, collect_adapters(make_plugin_manager()))
    except ConfigError as exc:
        print_config_errors(exc)
        return 2
    host = host or config.listen.host
    port = config.listen.port if port is None else port
    configure_logging(config)
    creds = asyncio.run(bootstrap(config))
    if creds is not None:
        print(demo_banner(creds, f"http://{_netloc(host, port)}"), flush=True)
    hyper = HypercornConfig()
    hyper.bind = [_netloc(host, port)]
    hyper.workers = max(workers, 1)
    hyper.graceful_timeout = GRACEFUL_TIMEOUT_S
    hyper.accesslog = None  # ours is the JSON access log middleware
    hyper.errorlog = logging.getLogger("hypercorn.error")  # through our handlers, once
    with simulator_child(config.simulator):
        try:
            if workers <= 1:
                with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
                    runner.run(_serve_here(config, hyper))
                return 0
            from hypercorn.run import run

            os.environ[CONFIG_ENV] = str(Path(config_path).resolve())
            hyper.application_path = "gateway.serve:worker_app()"
            if event_loop_factory() is not None:
                hyper.worker_class = "uvloop"
            return run(hyper)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            print(f"error: cannot listen on {_netloc(host, port)}: the address is in use", file=sys.stderr)
            return 1


async def _serve_here(config: Config, hyper: HypercornConfig) -> None:
    from hypercorn.asyncio import serve as hypercorn_serve

    from gateway.app import create_app

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await hypercorn_serve(create_app(config), hyper, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop where it is installed (it is a dependency on Linux): a faster event loop for the
    server and its upstream client alike; the standard loop otherwise."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- the simulator child process -----------------------------------------------------------------

def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGTERM it if the gateway dies (even by
    SIGKILL), so that a crashed gateway leaves no simulator holding its port."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def simulator_child(sim: SimulatorConfig) -> Iterator[subprocess.Popen[bytes] | None]:
    """``python -m gateway simulator`` as a child while the block runs, when enabled. Its own
    session keeps a terminal's Ctrl-C from killing it before in-flight requests finish."""
    if not sim.enabled:
        yield None
        return
    if _listening(sim.host, sim.port):
        log.warning("something already listens on %s:%d; using it as the simulator", sim.host, sim.port)
        yield None
        return
    command = [sys.executable, "-m", "gateway", "simulator", "--host", sim.host, "--port", str(sim.port),
               "--ttft-ms", str(sim.ttft_ms), "--token-ms", str(sim.token_ms)]
    child = subprocess.Popen(command, start_new_session=True,
                             preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    try:
        deadline = time.monotonic() + SIMULATOR_START_TIMEOUT_S
        while not _listening(sim.host, sim.port):
            if child.poll() is not None:
                raise RuntimeError(f"the simulator exited with code {child.returncode} before listening")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the simulator did not listen on {sim.host}:{sim.port} in time")
            time.sleep(0.05)
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
