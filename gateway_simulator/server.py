"""The simulator's aiohttp app: the core routes (health, request log), the sides that plugins add
through the ``gateway_simulator_routes`` hook (``gateway_simulator.sides``), and running it
(in-process or as ``gateway simulator``).

The core knows no upstream API: every side (its paths, credential, headers, error envelope) comes
from a plugin; see :mod:`gateway_simulator.toolkit` for how to write one and
:mod:`gateway_simulator.context` for the fault-option grammar.
"""

from __future__ import annotations

import asyncio
import errno
import secrets
import signal
import sys

from aiohttp import web

from gateway_simulator import request_log
from gateway_simulator.context import SETTINGS_KEY, SimulatorSettings, json_response
from gateway_simulator.routing import ROUTES_KEY, VENDOR_KEY, RouteTable
from gateway_simulator.sides import add_sides


async def _mark_simulated(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["x-simulator"] = "true"
    vendor = request.get(VENDOR_KEY)
    if vendor is not None:
        vendor.stamp(request, response)


# A random token this simulator answers in ``/healthz`` ("instance"), so that whoever started it
# (``gateway serve``) can tell its own child from another process listening on the same port.
INSTANCE_KEY = web.AppKey("instance", str)


async def _healthz(request: web.Request) -> web.Response:
    return json_response({"status": "ok", "simulator": True, "instance": request.app[INSTANCE_KEY]})


def create_app(
    settings: SimulatorSettings | None = None,
    *,
    extra_plugins: tuple[object, ...] = (),
    load_entrypoints: bool = True,
    instance_token: str | None = None,
) -> web.Application:
    """The simulator app with every side (``gateway_simulator.sides``): the built-ins, the
    ``gateway_simulator`` entry points (unless ``load_entrypoints`` is false) and ``extra_plugins``
    (objects or modules with hook implementations), each adding routes from
    ``gateway_simulator_routes(app)``."""
    app = web.Application(middlewares=[request_log.middleware], client_max_size=64 * 1024 * 1024)
    app[SETTINGS_KEY] = settings or SimulatorSettings()
    app[INSTANCE_KEY] = instance_token or secrets.token_hex(16)
    app[ROUTES_KEY] = RouteTable()
    app.on_response_prepare.append(_mark_simulated)
    app.router.add_get("/healthz", _healthz)
    request_log.install(app)
    add_sides(app, load_entrypoints=load_entrypoints, extra_plugins=extra_plugins)
    return app


class SimulatorRunner(web.AppRunner):
    """AppRunner that also exposes the bound port as ``sim_port``."""

    sim_port: int = 0


async def start_simulator(
    host: str = "127.0.0.1",
    port: int = 8101,
    settings: SimulatorSettings | None = None,
    *,
    extra_plugins: tuple[object, ...] = (),
    instance_token: str | None = None,
) -> SimulatorRunner:
    """Start the simulator and return its (listening) runner; call ``await runner.cleanup()`` to stop."""
    runner = SimulatorRunner(
        create_app(settings, extra_plugins=extra_plugins, instance_token=instance_token),
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=0.5,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    runner.sim_port = int(runner.addresses[0][1]) if runner.addresses else port
    return runner


def serve_simulator_forever(host: str, port: int, settings: SimulatorSettings | None = None,
                            instance_token: str | None = None) -> int:
    """Blocking entry point for ``gateway simulator``; stops cleanly on SIGINT / SIGTERM. Returns
    the exit code: 1, after one line on stderr, when the port is taken."""

    async def main() -> None:
        runner = await start_simulator(host, port, settings, instance_token=instance_token)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-unix
                pass
        print(f"upstream simulator listening on http://{host}:{runner.sim_port}", flush=True)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        try:
            import uvloop  # same event loop as the gateway, so benchmarks compare like with like
        except ImportError:
            asyncio.run(main())
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(main())
    except KeyboardInterrupt:  # pragma: no cover
        pass
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        print(f"error: the simulator cannot listen on {where}: the address is in use", file=sys.stderr)
        return 1
    return 0
