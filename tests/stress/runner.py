"""The gateway under stress, as its own process: ``python -m tests.stress.runner CONFIG PORT``.

The app of ``create_app`` served on the default server, as ``gateway serve`` serves it, plus one
route that only this runner adds, ``GET /_stress/stats``: the serving process's pid, RSS, open
files (and how many of them are sockets), threads and asyncio tasks, read from inside so that a
soak can watch them. Nothing of it is in the product.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.edge.http import json_response
from gateway.hooks.specs import hookimpl


def stats() -> dict[str, int]:
    rss_kb = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    fds = os.listdir("/proc/self/fd")
    sockets = 0
    for fd in fds:
        with contextlib.suppress(OSError):  # the directory's own fd is gone by now
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return {"pid": os.getpid(), "rss_bytes": rss_kb * 1024, "open_files": len(fds), "sockets": sockets,
            "threads": len(os.listdir("/proc/self/task")), "asyncio_tasks": len(asyncio.all_tasks())}


async def stats_endpoint(request: Request) -> Response:
    return json_response(stats())


class StressProbe:
    @hookimpl
    def gateway_routes(self, gateway: Any) -> list[BaseRoute]:
        return [Route("/_stress/stats", stats_endpoint, methods=["GET"])]


CONFIG_ENV = "GATEWAY_STRESS_CONFIG"


def app_factory() -> Any:
    """The app, in the serving process."""
    from gateway.server.serve import serving_app

    return serving_app(os.environ[CONFIG_ENV], extra_plugins=(StressProbe(),), load_entrypoints=False)


def main(config_path: str, port: int) -> int:
    """Served as ``gateway serve`` serves: on the default server (``gateway.server.servers``)."""
    from gateway.server.servers import DEFAULT_SERVER, Listen, run

    os.environ[CONFIG_ENV] = os.path.abspath(config_path)
    return run(DEFAULT_SERVER, "tests.stress.runner:app_factory", Listen("127.0.0.1", port, graceful_s=5.0))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
