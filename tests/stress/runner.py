"""The gateway under stress, as its own process: ``python -m tests.stress.runner CONFIG PORT``.

The app of ``create_app`` served by hypercorn (as the test fixtures serve it), plus one route that
only this runner adds, ``GET /_stress/stats``: the process's RSS, open files, threads and asyncio
tasks, read from inside so that a soak can watch them. Nothing of it is in the product.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.config import load_config
from gateway.hookspecs import hookimpl
from gateway.http import json_response


def stats() -> dict[str, int]:
    rss_kb = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return {"rss_bytes": rss_kb * 1024, "open_files": len(os.listdir("/proc/self/fd")),
            "threads": len(os.listdir("/proc/self/task")), "asyncio_tasks": len(asyncio.all_tasks())}


async def stats_endpoint(request: Request) -> Response:
    return json_response(stats())


class StressProbe:
    @hookimpl
    def gateway_routes(self, gateway: Any) -> list[BaseRoute]:
        return [Route("/_stress/stats", stats_endpoint, methods=["GET"])]


async def main(config_path: str, port: int) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config as HypercornConfig

    from gateway.app import create_app
    from gateway.serve import configure_logging

    config = load_config(config_path)
    configure_logging(config)
    hyper = HypercornConfig()
    hyper.bind = [f"127.0.0.1:{port}"]
    hyper.accesslog = None
    hyper.graceful_timeout = 5.0
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    app = create_app(config, extra_plugins=(StressProbe(),), load_entrypoints=False)
    await serve(app, hyper, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
