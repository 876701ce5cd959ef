"""A result file relayed from its upstream to the client as it arrives, never held whole.

``relay(engine, request, task, slot)`` serves one result file of a task (``media.MediaItem``):

* asked through ``TaskHttp.open``: an upstream API path or a link on the upstream's own origin
  with its credential; a link anywhere else (and any redirect off the origin) only through the
  SSRF guard of callbacks (public addresses, or ``tasks.callback_allowlist``), without it;
* ``Range`` and ``If-Range`` go upstream and a 206 (or 416) comes back as the upstream gave it,
  with ``Content-Range`` and ``Accept-Ranges``: a browser's video player seeks through the gateway;
* relayed 64 KB at a time under the client's back-pressure (memory stays flat whatever the size);
  a file whose ``Content-Length`` is over ``tasks.media_download_bytes`` is refused (502) before
  anything is sent, one without a length is cut when it passes the limit, and a download still
  running after ``tasks.media_download_s`` is cut (both logged, naming the upstream);
* a client hanging up stops the upstream transfer at once; an upstream cut mid-file (or a cut
  above) leaves the client's body unfinished (the connection is dropped), so a truncated download
  is never mistaken for a whole, shorter file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

import aiohttp
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.edge.http import request_id
from gateway.runtime.errors import NotFound, UpstreamError, UpstreamHTTPError
from gateway.runtime.observe import current_request_id
from gateway.storage.rows import TaskRecord
from gateway.tasks.media import MediaItem, items_of
from gateway.upstream.attempt import UpstreamFailure, upstream_io

if TYPE_CHECKING:
    from gateway.tasks.engine import TaskEngine

__all__ = ["CHUNK", "DownloadStream", "open_file", "relay"]

log = logging.getLogger("gateway.upstream")
CHUNK = 64 * 1024
_RELAYED = ("content-range", "accept-ranges", "etag", "last-modified")
_FORWARDED = ("Range", "If-Range")
_PASSED = frozenset({200, 206, 416})  # statuses relayed as they are (416: a range past the end)
_MEDIA_KINDS = ("image/", "video/", "audio/")
# A file an upstream chose is served from the gateway's origin (where the console keeps its
# token): browsers must not sniff it into a page, and nothing in it may run.
_LOCKED = ((b"x-content-type-options", b"nosniff"),
           (b"content-security-policy", b"sandbox"))


class DownloadStream(Response):
    """An ASGI response relaying ``response``'s body (a Response only so a route may return it)."""

    def __init__(self, upstream_name: str, response: aiohttp.ClientResponse, media_type: str,
                 filename: str, *, limit_bytes: int, deadline_s: float,
                 head_only: bool = False) -> None:  # no super().__init__: there is no body to render
        self.status_code = response.status
        self.background = None
        self._name = upstream_name
        self._response = response
        self._limit = limit_bytes
        self._deadline_s = deadline_s
        self._head_only = head_only
        kind = response.headers.get("Content-Type") or ""
        if not kind.lower().startswith(_MEDIA_KINDS) or "svg" in kind.lower():
            kind = media_type  # never a page (HTML, SVG with script) on the gateway's own origin
        disposition = f'inline; filename="{filename}"'
        self._out: list[tuple[bytes, bytes]] = [(b"content-type", kind.encode("latin-1")),
                                                (b"content-disposition", disposition.encode("latin-1")),
                                                *_LOCKED]
        # aiohttp decodes a compressed body (asked for as is, below, but a server may still send
        # one): its Content-Length would then not be the length of what is relayed.
        encoded = response.headers.get("Content-Encoding", "identity").lower() != "identity"
        if response.content_length is not None and not encoded:
            self._out.append((b"content-length", str(response.content_length).encode()))
        for name in _RELAYED:
            if (value := response.headers.get(name)) is not None:
                self._out.append((name.encode(), value.encode("latin-1")))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._head_only:
            self._response.close()
            await send({"type": "http.response.start", "status": self.status_code, "headers": self._out})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self._out})
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
        sent = 0
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._deadline_s):
                with upstream_io(self._name, "mid-download"):
                    async for chunk in self._response.content.iter_chunked(CHUNK):
                        sent += len(chunk)
                        if sent > self._limit:
                            log.warning("upstream %s: a download passed tasks.media_download_bytes "
                                        "(%d bytes) and was cut (request %s)", self._name, self._limit,
                                        current_request_id() or "-")
                            return
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except TimeoutError:
            log.warning("upstream %s: a download ran past tasks.media_download_s (%.0f s, %d bytes sent) "
                        "and was cut", self._name, time.monotonic() - started, sent)
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def open_file(engine: TaskEngine, request: Request, task: TaskRecord, item: MediaItem,
                    filename: str) -> DownloadStream:
    """Ask the task's upstream for ``item`` and answer with its bytes as they come."""
    config = next((u for u in engine.gateway.config.upstreams if u.name == task.upstream), None)
    if config is None:
        raise UpstreamError(f"The upstream that ran task `{task.task_id}` is no longer configured.")
    settings = engine.gateway.config.tasks
    forwarded = {name: request.headers[name] for name in _FORWARDED if name in request.headers}
    forwarded["Accept-Encoding"] = "identity"  # media is compressed already; lengths stay true
    try:
        resp = await engine.http.open(config, item.source, request_id=request_id(request), headers=forwarded,
                                      total_s=None)  # the relay keeps its own deadline
    except UpstreamFailure as failure:  # already logged, naming the upstream; nothing to retry here
        raise UpstreamError(f"The upstream could not serve the file ({failure.reason}).") from failure
    if resp.status not in _PASSED:
        resp.release()
        if 400 <= resp.status < 500:
            raise UpstreamHTTPError(resp.status,
                                    f"The upstream could not serve the file (HTTP {resp.status}).")
        raise UpstreamError(f"The upstream answered the file with HTTP {resp.status}.")
    limit = settings.media_download_bytes
    if resp.content_length is not None and resp.content_length > limit:
        resp.release()
        log.warning("upstream %s: a file of %d bytes is over tasks.media_download_bytes (%d)", config.name,
                    resp.content_length, limit)
        raise UpstreamError(f"The file is larger than this gateway relays ({limit} bytes).",
                            code="media_too_large")
    return DownloadStream(config.name, resp, item.media_type, filename, limit_bytes=limit,
                          deadline_s=settings.media_download_s, head_only=request.method == "HEAD")


async def relay(engine: TaskEngine, request: Request, task: TaskRecord, slot: str) -> DownloadStream:
    """Result file ``slot`` of ``task`` (404 when the task has no such file, or not yet)."""
    item = items_of(engine.families.get(task.family), task).get(slot)
    if item is None:
        raise NotFound(f"Task `{task.task_id}` has no file `{slot}` (yet).", code="media_not_found")
    return await open_file(engine, request, task, item, f"{task.task_id}-{slot}.{item.ext}")
