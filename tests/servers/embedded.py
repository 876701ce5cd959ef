"""Serve an app in the test's own event loop on any supported ASGI server: what the ``gateway_server``
fixture (tests/conftest.py) runs the suite's gateways on. The server is ``GATEWAY_TEST_SERVER``,
by default the one ``gateway serve`` uses (gateway.server.servers.DEFAULT_SERVER), so that the suite
tests the server users get (granian); ``GATEWAY_TEST_SERVER=uvicorn make test`` or ``=hypercorn``
runs it on another. Each server gets the request-head limits ``gateway serve`` gives it
(``gateway.server.options``), from the app's ``limits.header_timeout_s`` and
``limits.request_head_bytes``. uvicorn and hypercorn are imported only when chosen (optional extras)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from gateway.server import options as server_config
from gateway.server.servers import DEFAULT_SERVER, SERVERS, ServerLimits, not_installed

Stop = Callable[[], Awaitable[None]]
GRACEFUL_S = 5.0


# Servers whose request-head deadline (limits.header_timeout_s) holds for a head that never
# completes: uvicorn has none (gateway.server.options).
HEAD_DEADLINE_SERVERS = ("granian", "hypercorn")


def server_params(names: tuple[str, ...] = SERVERS) -> list[Any]:
    """``names`` as pytest parameters, each skipped where its optional extra is not installed."""
    return [pytest.param(name, marks=pytest.mark.skipif(not_installed(name) is not None,
                                                        reason=not_installed(name) or ""))
            for name in names]


def chosen_server() -> str:
    return os.environ.get("GATEWAY_TEST_SERVER", DEFAULT_SERVER)


def _bound_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def server_limits(app: Any) -> ServerLimits:
    """The gateway app's request-head limits (``limits``); the defaults for any other app."""
    gateway = getattr(getattr(app, "state", None), "gateway", None)
    if gateway is None:
        return ServerLimits()
    return ServerLimits.of(gateway.config.limits)


def start(app: Any, server: str | None = None,
          limits: ServerLimits | None = None) -> tuple[int, asyncio.Task[None], Callable[[], None]]:
    """Start serving ``app`` under ``limits`` (by default the app's own, ``server_limits``); returns
    the port, the serving task and a function that asks it to stop gracefully (await the task after
    calling it)."""
    server = server or chosen_server()
    limits = limits or server_limits(app)
    if server == "granian":
        from granian.constants import Interfaces
        from granian.server.embed import Server as Granian

        # Granian binds by itself: a port found free here is bound again at once by it.
        with _bound_socket() as probe:
            port = probe.getsockname()[1]
        granian = Granian(app, address="127.0.0.1", port=port, interface=Interfaces.ASGI, websockets=False,
                          http=server_config.GRANIAN_HTTP, http1_settings=server_config.granian_http1(limits),
                          log_enabled=False)
        logging.getLogger("granian").propagate = True
        return port, asyncio.create_task(granian.serve()), granian.stop
    if server == "uvicorn":
        import uvicorn

        sock = _bound_socket()
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, loop="none", ws="none", lifespan="on",
                                proxy_headers=False, access_log=False, log_config=None,
                                timeout_graceful_shutdown=int(GRACEFUL_S),
                                **server_config.uvicorn_options(limits))
        uv = uvicorn.Server(config)

        def stop_uvicorn() -> None:
            uv.should_exit = True

        async def run() -> None:
            try:
                await uv.serve(sockets=[sock])
            finally:
                sock.close()

        return port, asyncio.create_task(run()), stop_uvicorn
    from hypercorn.asyncio.run import worker_serve
    from hypercorn.utils import wrap_app

    hyper = server_config.hypercorn_config(limits)
    hyper.bind = ["127.0.0.1:0"]
    hyper.accesslog = None
    hyper.errorlog = logging.getLogger("hypercorn.error")  # propagate to pytest's capture
    hyper.graceful_timeout = GRACEFUL_S
    # Bound here, before serving, so that the port is known without racing another process.
    sockets = hyper.create_sockets()
    port = sockets.insecure_sockets[0].getsockname()[1]
    shutdown = asyncio.Event()
    task = asyncio.create_task(worker_serve(wrap_app(app, hyper.wsgi_max_body_size, "asgi"), hyper,
                                            sockets=sockets, shutdown_trigger=shutdown.wait))
    return port, task, shutdown.set


async def serving(app: Any, server: str | None = None,
                  limits: ServerLimits | None = None) -> tuple[str, Callable[[], Awaitable[None]]]:
    """``app`` served as ``start`` serves it, once it answers ``GET /healthz``: its base URL and
    a function that stops it."""
    port, task, ask = start(app, server, limits)
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as probe:
        for _ in range(1000):
            if task.done():
                task.result()  # raises the start-up error
            with contextlib.suppress(aiohttp.ClientError):
                async with probe.get(base + "/healthz") as resp:
                    if resp.status == 200:
                        break
            await asyncio.sleep(0.01)
    return base, lambda: stop(task, ask)


async def stop(task: asyncio.Task[None], ask: Callable[[], None]) -> None:
    ask()
    with contextlib.suppress(asyncio.CancelledError):
        await task
