"""The reference floor: a bare Starlette + aiohttp relay (no auth, no metering, no translation).

It forwards any POST to the same path on ``BENCH_FLOOR_UPSTREAM`` and relays the answer, streamed
as it arrives. Whatever the gateway costs above this, on the same server, is the gateway's own.
Served by ``gateway.server.servers`` exactly as the gateway is: ``python -m bench.floor SERVER PORT``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator

import aiohttp
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

UPSTREAM = os.environ.get("BENCH_FLOOR_UPSTREAM", "http://127.0.0.1:8101")


def app() -> Starlette:
    state: dict[str, aiohttp.ClientSession] = {}

    async def relay(request: Request) -> Response:
        headers = {"content-type": "application/json", "authorization": "Bearer sk-sim",
                   "x-api-key": "sk-sim", "anthropic-version": "2023-06-01"}
        query = "?" + request.url.query if request.url.query else ""
        upstream = await state["s"].post(UPSTREAM + request.url.path + query, data=await request.body(),
                                         headers=headers)
        kind = upstream.headers.get("content-type", "application/json")
        if not kind.startswith("text/event-stream"):
            async with upstream:
                return Response(await upstream.read(), upstream.status, media_type=kind)

        async def chunks() -> AsyncIterator[bytes]:
            async with upstream:
                async for data in upstream.content.iter_any():
                    yield data

        return StreamingResponse(chunks(), upstream.status, media_type=kind)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        state["s"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        yield
        await state["s"].close()

    return Starlette(routes=[Route("/{path:path}", relay, methods=["POST"])], lifespan=lifespan)


if __name__ == "__main__":
    from gateway.server import servers

    sys.exit(servers.run(sys.argv[1], "bench.floor:app", servers.Listen("127.0.0.1", int(sys.argv[2]))))
