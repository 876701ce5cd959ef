"""A small aiohttp app served on loopback for a test: a fake upstream, a callback receiver."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web


@contextlib.asynccontextmanager
async def serving(app: web.Application, **runner_options: Any) -> AsyncIterator[str]:
    """``app`` on 127.0.0.1 at a free port (``runner_options`` go to ``web.AppRunner``); yields its
    base URL, ``http://127.0.0.1:<port>``."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
