"""The simulator's request log: the last requests it received, for tests to check what reached
the upstream (``GET /_sim/requests``; ``DELETE`` clears it). Each entry records whether the handler
completed or was cancelled because the caller hung up."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler

LOG_SIZE = 200


class LogEntries(collections.deque[dict[str, Any]]):
    """The last ``LOG_SIZE`` requests, oldest first."""

    def __init__(self) -> None:
        super().__init__(maxlen=LOG_SIZE)


LOG_KEY = web.AppKey("sim_log", LogEntries)


def _json(payload: Any) -> web.Response:
    return web.Response(body=orjson.dumps(payload), content_type="application/json")


@web.middleware
async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
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
    entries: LogEntries = request.app[LOG_KEY]
    return _json(list(entries))


async def clear_requests(request: web.Request) -> web.Response:
    request.app[LOG_KEY].clear()
    return _json({"cleared": True})


def install(app: web.Application) -> None:
    """Give ``app`` an empty log and its ``/_sim/requests`` routes (the middleware is passed to
    ``web.Application`` by the caller)."""
    app[LOG_KEY] = LogEntries()
    app.router.add_get("/_sim/requests", list_requests)
    app.router.add_delete("/_sim/requests", clear_requests)
