"""On uvicorn (through ``gateway.uvicorn_protocol``) the scope says when a request's whole body is
in (``BODY_COMPLETE_SCOPE_KEY``), which spares the body deadline (``gateway.deadlines``) a timer;
a body still arriving is not marked, so its deadline still holds."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.http import BODY_COMPLETE_SCOPE_KEY
from tests.servers import embedded


async def echo(request: Request) -> Response:
    complete_at_start = BODY_COMPLETE_SCOPE_KEY in request.scope
    body = await request.body()
    return JSONResponse({"complete_at_start": complete_at_start, "bytes": len(body),
                         "complete_at_end": BODY_COMPLETE_SCOPE_KEY in request.scope})


async def _answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    return await reader.readexactly(length)


async def test_a_body_that_came_with_its_head_is_marked_complete_and_one_still_arriving_is_not() -> None:
    base, stop = await embedded.serving(Starlette(routes=[Route("/echo", echo, methods=["POST"])]), "uvicorn")
    port = int(base.rsplit(":", 1)[1])
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        assert await _answer(reader) == b'{"complete_at_start":true,"bytes":5,"complete_at_end":true}'

        # The same connection, a body sent in two pieces with a pause: not complete when the app
        # starts (its deadline applies), complete once read.
        writer.write(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhello")
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.write(b"world")
        assert await _answer(reader) == b'{"complete_at_start":false,"bytes":10,"complete_at_end":true}'
        writer.close()
    finally:
        await stop()
