"""The mp4 download (spec 4.10): the upstream's bytes relayed as they arrive, never held whole.

The upstream is asked with its own credential through ``TaskHttp.open`` (redirects followed: a
result file often sits behind one, e.g. a signed storage link); the client gets ``video/mp4`` with
the upstream's length when it gave one. A client hanging up stops the upstream transfer at once;
an upstream cut mid-file leaves the client's body unfinished (the connection is dropped), so a
truncated download is never mistaken for a whole, shorter file.
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.api.relay import UpstreamFailure, upstream_io

CHUNK = 64 * 1024


class DownloadStream(Response):
    """An ASGI response relaying ``response``'s body (a Response only so a route may return it)."""

    def __init__(self, upstream_name: str, response: aiohttp.ClientResponse, media_type: str,
                 filename: str) -> None:  # no super().__init__: there is no body to render
        self.status_code = 200
        self.background = None
        self._name = upstream_name
        self._response = response
        disposition = f'inline; filename="{filename}"'
        self._out: list[tuple[bytes, bytes]] = [(b"content-type", media_type.encode("latin-1")),
                                                (b"content-disposition", disposition.encode("latin-1"))]
        if response.content_length is not None:
            self._out.append((b"content-length", str(response.content_length).encode()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self._out})
            await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watch):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError, UpstreamFailure):
                    await task
            self._response.close()

    @staticmethod
    async def _watch_disconnect(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _pump(self, send: Send) -> None:
        with upstream_io(self._name, "mid-download"):
            async for chunk in self._response.content.iter_chunked(CHUNK):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
