"""Request-body deadlines: 408 ``request_timeout`` when a client stops sending its body.

The server bounds the request head (``limits.header_timeout_s``, ``gateway.server.options``) but
not the body: an authenticated client that sends its headers and then stalls, or dribbles a byte a
second, would hold a connection, a handler and its buffers for ever. ``BodyDeadlineMiddleware`` wraps
``receive`` so that, while the body is still coming,

* each wait for the next piece lasts at most ``limits.body_idle_timeout_s``, and
* the whole body must have arrived ``limits.body_total_timeout_s`` after the request started.

A missed deadline raises ``RequestTimeout`` from ``receive``, which the route's ``endpoint``
wrapper (or ``EdgeMiddleware``'s guard) answers in the family's envelope; the answer says
``Connection: close`` since the rest of the body is never read. Once the body is complete,
``receive`` is passed through untouched (the streaming relay waits on it for the disconnect).

The time the total deadline counts from is also when the request came in for the rest of the app
(``gateway.edge.http.ARRIVED_SCOPE_KEY``): one clock reading for both, taken before any handler ran.
"""

from __future__ import annotations

import asyncio
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.edge.http import ARRIVED_SCOPE_KEY
from gateway.runtime.coarse_timers import Deadline
from gateway.runtime.errors import GatewayError
from gateway.runtime.observe import current_scope
from gateway.settings.config import LimitsConfig


class RequestTimeout(GatewayError):
    status = 408
    code = "request_timeout"


class BodyDeadlineMiddleware:
    def __init__(self, app: ASGIApp, limits: LimitsConfig) -> None:
        self.app = app
        self.idle_s = limits.body_idle_timeout_s
        self.total_s = limits.body_total_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started: float = scope.setdefault(ARRIVED_SCOPE_KEY, time.perf_counter())
        body_done = False
        timed_out = False
        request_scope = current_scope()  # EdgeMiddleware's: it says Connection: close when asked

        async def timed_receive() -> Message:
            nonlocal body_done, timed_out
            if body_done:
                return await receive()
            remaining = self.total_s - (time.perf_counter() - started)
            limit = min(self.idle_s, remaining)
            try:
                if limit <= 0:
                    raise TimeoutError
                async with Deadline(asyncio.get_running_loop().time() + limit):
                    message = await receive()
            except TimeoutError:
                timed_out = True
                if request_scope is not None:
                    request_scope.close_connection = True
                idle = limit < remaining
                raise RequestTimeout(
                    f"The request body was not received in time: no data for {self.idle_s:g} s."
                    if idle else
                    f"The request body was not received in time: it took longer than {self.total_s:g} s."
                ) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        if request_scope is not None:  # no wrapper of send needed
            await self.app(scope, timed_receive, send)
            return

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and timed_out:
                message["headers"] = [*message.get("headers", ()), (b"connection", b"close")]
            await send(message)

        await self.app(scope, timed_receive, closing_send)
