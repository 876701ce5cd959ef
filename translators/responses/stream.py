"""Streams of the Responses family: the two transforms the core's stream relay drives (translated
from another protocol, or a native upstream's events renamed), and the wrapper that stores the
turn before the final event leaves.

The relay (``gateway.relay.stream.StreamRelay``) pumps upstream chunks through a transform and
sends what ``close`` returns as the last body message. Both transforms put the terminal event
(``response.completed`` / ``response.incomplete``) there and only there, so ``StoreBeforeEnd``
can hold that one message until the turn is durably written: a client that reads the final event
can continue the conversation at once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.api import StreamDecoder
from gateway.api.canonical import Usage
from gateway.api.relay import estimate_text_tokens
from translators.responses.response import Json
from translators.responses.stream_encode import CONTENT_TYPE, ResponsesStreamEncoder

log = logging.getLogger(__name__)


class Finalising(Protocol):
    """A transform that knows the final response object once it has made the final event."""

    @property
    def final(self) -> Json | None: ...

    def error(self, status: int, code: str, message: str) -> bytes: ...


class TranslatedStream:
    """Another protocol's stream -> canonical events -> Responses events."""

    content_type = CONTENT_TYPE

    def __init__(self, decoder: StreamDecoder, encoder: ResponsesStreamEncoder, input_estimate: int) -> None:
        self._decoder = decoder
        self._encoder = encoder
        self._input_estimate = input_estimate
        self._started = False

    def feed(self, chunk: bytes) -> bytes:
        out = b""
        if not self._started:
            self._started = True
            out = self._encoder.start()
        return out + b"".join(self._encoder.encode(e) for e in self._decoder.feed(chunk))

    def close(self) -> bytes:
        out = b"".join(self._encoder.encode(e) for e in self._decoder.close())
        if self._decoder.complete:
            out += self._encoder.complete(self.usage())
        return out

    def usage(self) -> Usage:
        if self._encoder.usage is not None:
            return self._encoder.usage
        output = sum(estimate_text_tokens(t) for t in self._encoder.texts)
        return Usage(input_tokens=self._input_estimate, output_tokens=output, estimated=True)

    @property
    def complete(self) -> bool:
        return self._decoder.complete

    @property
    def final(self) -> Json | None:
        return self._encoder.final

    def error(self, status: int, code: str, message: str) -> bytes:
        return self._encoder.error(status, code, message)


class StoreBeforeEnd(Response):
    """ASGI wrapper: the last body message waits for ``store(final)`` when the transform made a
    final response; a failed write turns that message into an error event instead. (A Response
    only so that a route may return it, like the relay it wraps.)"""

    def __init__(
        self, inner: ASGIApp, transform: Finalising, store: Callable[[Json], Awaitable[None]]
    ) -> None:  # no body to render
        self.status_code = 200
        self.background = None
        self._inner = inner
        self._transform = transform
        self._store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                final = self._transform.final
                if final is not None:
                    try:
                        await self._store(final)
                    except Exception:  # the answer stands, but the client must not think it was kept
                        log.exception("could not store response %s", final.get("id"))
                        message = {
                            **message,
                            "body": self._transform.error(
                                500,
                                "storage_error",
                                "The response could not be stored; it cannot be continued.",
                            ),
                        }
            await send(message)

        await self._inner(scope, receive, guarded)
