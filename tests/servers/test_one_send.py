"""On uvicorn (through ``gateway.uvicorn_protocol``) a response's head and body leave in one send,
and a stream's head is not held back waiting for its first chunk."""

from __future__ import annotations

import asyncio
import asyncio.selector_events
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.servers import embedded


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def slow_stream(request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        await asyncio.sleep(0.5)
        yield b"data: late\n\n"
    return StreamingResponse(chunks(), media_type="text/event-stream")


async def test_head_and_body_in_one_send_and_stream_heads_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Starlette(routes=[Route("/healthz", healthz), Route("/stream", slow_stream)])
    base, stop = await embedded.serving(app, "uvicorn")
    port = int(base.rsplit(":", 1)[1])
    sends: list[bytes] = []
    write = asyncio.selector_events._SelectorSocketTransport.write

    def counted(self: Any, data: Any) -> None:
        if self.get_extra_info("sockname")[1] == port:  # the server's side only
            sends.append(bytes(data))
        write(self, data)

    monkeypatch.setattr(asyncio.selector_events._SelectorSocketTransport, "write", counted)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(3):
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            assert await reader.readexactly(11) == b'{"ok":true}', head
        assert len(sends) == 3 and all(s.startswith(b"HTTP/1.1 200") and s.endswith(b'{"ok":true}')
                                       for s in sends), sends

        writer.write(b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 0.3)  # before the first chunk
        assert head.startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        monkeypatch.undo()
        await stop()
