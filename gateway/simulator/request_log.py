"""The simulator's request log: the last requests it received, for tests to check what reached
the upstream (``GET /_sim/requests``; ``DELETE`` clears it). Each entry records whether the handler
completed or was cancelled because the caller hung up."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

LOG_KEY = web.AppKey("sim_log", collections.deque)
LOG_SIZE = 200


def _json(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")


@web.middleware
async def middleware(request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
    if not request.path.startswith("/_sim/"):
        raw = await request.read() if request.body_exists else b""
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        entry: dict[str, Any] = {
            "method": request.method,
            "path": request.path,
            "query": dict(request.query),
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "body_json_or_null": body,
            "outcome": "in_progress",
        }
        request.app[LOG_KEY].append(entry)
        # ``outcome`` lets tests see that a gateway hung up on a stream (the handler is cancelled).
        try:
            response = await handler(request)
        except (asyncio.CancelledError, ConnectionResetError):
            entry["outcome"] = "cancelled"
            raise
        entry["outcome"] = "completed"
        return response
    return await handler(request)


async def list_requests(request: web.Request) -> web.Response:
    return _json(list(request.app[LOG_KEY]))


async def clear_requests(request: web.Request) -> web.Response:
    request.app[LOG_KEY].clear()
    return _json({"cleared": True})


