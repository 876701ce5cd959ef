"""``gateway serve``: bootstrap once, start the simulator child, serve on the chosen ASGI server
(gateway.server.servers: granian by default, uvicorn, hypercorn), shut down gracefully (in-flight
requests finish, then the lifespan stops the Meter, pool and storage).

Every server builds the app with ``gateway.server.serve:worker_app()``, which reads the config path from
``GATEWAY_CONFIG`` (with ``--workers N``, once in each worker process); migrations and the demo user
are done before, here in the parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import http.client
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from starlette.applications import Starlette

from gateway.edge.app import create_app
from gateway.hooks.manager import collect_adapters, make_plugin_manager
from gateway.runtime import tuning
from gateway.runtime.reload import Reloader
from gateway.runtime.workers import WORKERS_DIR_ENV
from gateway.server import servers
from gateway.server.bootstrap import (
    DatabaseOpenError,
    DemoCredentials,
    bootstrap,
    demo_banner,
    example_model,
    startup_summary,
)
from gateway.server.servers import DEFAULT_SERVER
from gateway.settings.config import (
    Config,
    ConfigError,
    SimulatorConfig,
    load_config,
    load_serving_config,
    serves_a_model,
)
from gateway.settings.report import print_config_errors

CONFIG_ENV = "GATEWAY_CONFIG"
# Handed to the simulator child: the token it answers in /healthz (to know it is ours).
SIMULATOR_TOKEN_ENV = "GATEWAY_SIMULATOR_TOKEN"
# Beyond ``shutdown_grace_s``: ending the streams still open, metering them, flushing the meter.
SHUTDOWN_MARGIN_S = 10.0
SIMULATOR_START_TIMEOUT_S = 20.0

log = logging.getLogger("gateway.server.serve")


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
    """The app factory every server calls (once in each worker process)."""
    return serving_app(os.environ[CONFIG_ENV])


def serving_app(config_path: str, extra_plugins: Sequence[object] = (),
                load_entrypoints: bool = True) -> Starlette:
    """The app as a serving process runs it: its config loaded, logging configured, and the
    process tuned for serving once what it serves is built (``gateway.runtime.tuning``)."""
    reloader = Reloader(config_path)  # SIGHUP, gateway reload, POST /admin/reload re-read the file
    reloader.remember()
    config = load_config(config_path)
    configure_logging(config)
    app = create_app(config, extra_plugins=extra_plugins, load_entrypoints=load_entrypoints)
    gateway = app.state.gateway
    gateway.lifecycle.chain_signals = True  # a real server's SIGTERM begins the drain
    reloader.attach(gateway)
    tuning.freeze_startup_objects()
    tuning.collect_young_less_often()
    return app


def serve(config_path: str, host: str | None = None, port: int | None = None, workers: int = 1,
          server: str = DEFAULT_SERVER) -> int:
    pm = make_plugin_manager()
    adapters = collect_adapters(pm)
    try:  # an upstream protocol no installed adapter speaks is refused here, before anything starts
        config = load_serving_config(config_path, adapters, model_required=False)
    except ConfigError as exc:
        print_config_errors(exc)
        return 2
    host = host or config.listen.host
    port = config.listen.port if port is None else port
    configure_logging(config)
    if not serves_a_model(config):  # check-config refuses it; an admin-only gateway may be meant
        log.warning("the config serves no model: every model call will be refused "
                    "(models, upstreams[].models)")
    try:
        # A taken port is known before the simulator starts or the demo key is made (and shown
        # once, for a server that would then not run).
        _check_port(host, port)
        if (missing := servers.not_installed(server)) is not None:
            raise StartupError(missing)
        with simulator_child(config.simulator):
            first_start = asyncio.run(bootstrap(config))
            if isinstance(first_start, DemoCredentials):
                text = {name for name, adapter in adapters.items() if "generate" in adapter.capabilities}
                model = example_model(config, text)
                print(demo_banner(first_start, f"http://{_netloc(host, port)}", model), flush=True)
            elif first_start is not None:
                log.info("%s", first_start)
            log.info("%s", startup_summary(config, [name for name, _ in pm.list_name_plugin()],
                                           f"{server} on {_netloc(host, port)}"))
            # Every server, and every worker process, builds the app with worker_app() from this path.
            os.environ[CONFIG_ENV] = str(Path(config_path).resolve())
            # The server's own graceful timeout outlasts the gateway's grace, so that the gateway
            # (gateway.runtime.lifecycle), not the server, ends the streams still open.
            graceful_s = config.shutdown_grace_s + SHUTDOWN_MARGIN_S
            listen = servers.Listen(host, port, max(workers, 1), graceful_s,
                                    servers.ServerLimits.of(config.limits), config.listen.backlog)
            try:
                with workers_directory():
                    return servers.run(server, "gateway.server.serve:worker_app", listen)
            except OSError as exc:  # taken in the meantime
                if exc.errno != errno.EADDRINUSE:
                    raise
                raise StartupError(_port_taken(host, port)) from None
    except (StartupError, DatabaseOpenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


@contextlib.contextmanager
def workers_directory() -> Iterator[None]:
    """Where this serve's workers register (``gateway.runtime.workers``): a reload reaches them all."""
    where = tempfile.mkdtemp(prefix="gateway-workers-")
    os.environ[WORKERS_DIR_ENV] = where
    try:
        yield
    finally:
        os.environ.pop(WORKERS_DIR_ENV, None)
        shutil.rmtree(where, ignore_errors=True)


class StartupError(Exception):
    """Start-up cannot go on: one line for the operator (exit code 1), never a traceback."""


def _port_taken(host: str, port: int) -> str:
    return f"cannot listen on {_netloc(host, port)}: the address is in use (listen in the config, or --port)"


def _check_port(host: str, port: int) -> None:
    """StartupError unless ``host:port`` can be bound now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise StartupError(_port_taken(host, port)) from None
            raise StartupError(f"cannot listen on {_netloc(host, port)}: {exc.strerror or exc}") from None


def _netloc(host: str, port: int) -> str:
    return servers.netloc(host, port)


# --- the simulator child process -----------------------------------------------------------------

def _die_with_parent() -> None:
    """Runs in the child before exec: a crashed gateway (even by SIGKILL) leaves no simulator
    holding its port."""
    tuning.die_with_parent(signal.SIGTERM)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def connect_host(host: str) -> str:
    """Where to reach a server listening on ``host`` (a wildcard address is reached on loopback)."""
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def _answers_with(host: str, port: int, token: str) -> bool:
    """True when the server on ``host:port`` is the simulator holding ``token`` (its /healthz)."""
    conn = http.client.HTTPConnection(host, port, timeout=1.0)  # direct: no proxy from the environment
    try:
        conn.request("GET", "/healthz")
        body = json.loads(conn.getresponse().read())
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        conn.close()
    return isinstance(body, dict) and body.get("instance") == token


@contextlib.contextmanager
def simulator_child(sim: SimulatorConfig) -> Iterator[subprocess.Popen[bytes] | None]:
    """``python -m gateway simulator`` as a child while the block runs, when enabled. Its own
    session keeps a terminal's Ctrl-C from killing it before in-flight requests finish. It is
    started with a random token that its /healthz must answer: whatever else listens on its port
    is never taken for it (StartupError instead)."""
    if not sim.enabled:
        yield None
        return
    host = connect_host(sim.host)
    where = _netloc(sim.host, sim.port)
    if _listening(host, sim.port):
        raise StartupError(f"the simulator's port {where} (simulator.port in the config) is already in use "
                           "by another process")
    token = secrets.token_hex(16)
    command = [sys.executable, "-m", "gateway", "simulator", "--host", sim.host, "--port", str(sim.port),
               "--ttft-ms", str(sim.ttft_ms), "--token-ms", str(sim.token_ms)]
    child = subprocess.Popen(command, start_new_session=True, env={**os.environ, SIMULATOR_TOKEN_ENV: token},
                             preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    try:
        deadline = time.monotonic() + SIMULATOR_START_TIMEOUT_S
        while not _answers_with(host, sim.port, token):
            if child.poll() is not None:
                raise StartupError(f"the simulator exited with code {child.returncode} before listening on "
                                   f"{where}")
            if time.monotonic() > deadline:
                raise StartupError(f"the simulator did not answer on {where} within "
                                   f"{SIMULATOR_START_TIMEOUT_S:g} s")
            time.sleep(0.05)
        log.info("simulator started on http://%s (pid %d)", where, child.pid)
        yield child
    finally:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
