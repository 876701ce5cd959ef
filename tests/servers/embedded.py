"""Serve an app in the test's own event loop on any supported ASGI server: what the ``gateway_server``
fixture (tests/conftest.py) runs the suite's gateways on. The server is ``GATEWAY_TEST_SERVER``,
by default the one ``gateway serve`` uses (gateway.servers.DEFAULT_SERVER), so that the suite
tests the server users get; ``GATEWAY_TEST_SERVER=hypercorn make test`` runs it on another. Each
server gets the request-head deadline ``gateway serve`` gives it (``gateway.server_config``), from
the app's ``limits.header_timeout_s``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import uvicorn

from gateway import server_config
from gateway.servers import DEFAULT_SERVER, Listen

Stop = Callable[[], Awaitable[None]]
GRACEFUL_S = 5.0


def chosen_server() -> str:
    return os.environ.get("GATEWAY_TEST_SERVER", DEFAULT_SERVER)


def _bound_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def header_timeout_s(app: Any) -> float:
    """The gateway app's ``limits.header_timeout_s``; the default for any other app."""
    gateway = getattr(getattr(app, "state", None), "gateway", None)
    if gateway is None:
        return float(Listen.header_timeout_s)
    return float(gateway.config.limits.header_timeout_s)


def start(app: Any, server: str | None = None) -> tuple[int, asyncio.Task[None], Callable[[], None]]:
    """Start serving ``app``; returns the port, the serving task and a function that asks it to
    stop gracefully (await the task after calling it)."""
    server = server or chosen_server()
    head_s = header_timeout_s(app)
    if server == "granian":
        from granian.constants import Interfaces
        from granian.server.embed import Server as Granian

        # Granian binds by itself: a port found free here is bound again at once by it.
        with _bound_socket() as probe:
            port = probe.getsockname()[1]
        granian = Granian(app, address="127.0.0.1", port=port, interface=Interfaces.ASGI, websockets=False,
                          http=server_config.GRANIAN_HTTP, http1_settings=server_config.granian_http1(head_s),
                          log_enabled=False)
        logging.getLogger("granian").propagate = True
        return port, asyncio.create_task(granian.serve()), granian.stop
    if server == "uvicorn":
        sock = _bound_socket()
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, loop="none", ws="none", lifespan="on",
                                proxy_headers=False, access_log=False, log_config=None,
                                timeout_graceful_shutdown=int(GRACEFUL_S),
                                **server_config.uvicorn_options(head_s))
        uv = _PromptUvicorn(config)

        def stop_uvicorn() -> None:
            uv.should_exit = True
            uv.stopping.set()

        async def run() -> None:
            try:
                await uv.serve(sockets=[sock])
            finally:
                sock.close()

        return port, asyncio.create_task(run()), stop_uvicorn
    from hypercorn.asyncio.run import worker_serve
    from hypercorn.utils import wrap_app

    hyper = server_config.hypercorn_config(head_s)
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


async def serving(app: Any, server: str | None = None) -> tuple[str, Callable[[], Awaitable[None]]]:
    """``app`` served as ``start`` serves it, once it answers ``GET /healthz``: its base URL and
    a function that stops it."""
    port, task, ask = start(app, server)
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


class _PromptUvicorn(uvicorn.Server):
    """uvicorn's server (0.54), which stops at once: it notices a stop without waiting for its next
    0.1 s tick, and its shutdown does what uvicorn's does without the fixed 0.1 s pause after asking
    the connections to close. Every test that starts a gateway stops one, and 0.2 s a test added
    minutes to the suite."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopping = asyncio.Event()

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864_000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.1):
                    await self.stopping.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        await asyncio.sleep(0)  # their connection_lost callbacks run
        try:
            async with asyncio.timeout(self.config.timeout_graceful_shutdown):
                await self._wait_tasks_to_complete()
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel()
        if not self.force_exit:
            await self.lifespan.shutdown()
