"""A scripted HTTP/1.1 server on loopback for the upstream client's tests: it parses each request
(httptools) and answers with whatever bytes, pauses or hang-ups its script writes."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import httptools


@dataclass
class Received:
    connection: int  # 1 for the server's first connection, and so on
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Script:
    """What the server answers to each request (given the request and its transport)."""

    answer: Callable[[Received, asyncio.Transport], Awaitable[None] | None]
    received: list[Received] = field(default_factory=list)
    connections: int = 0
    tasks: set[asyncio.Future[None]] = field(default_factory=set)  # answers still being written


class _ScriptedProtocol(asyncio.Protocol):
    def __init__(self, script: Script) -> None:
        self._script = script
        script.connections += 1
        self._number = script.connections
        self._parser = httptools.HttpRequestParser(self)
        self._headers: dict[str, str] = {}
        self._body = bytearray()
        self._path = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._parser.feed_data(data)

    def on_url(self, url: bytes) -> None:
        self._path = url.decode()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode().lower()] = value.decode()

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        request = Received(self._number, self._path, self._headers, bytes(self._body))
        self._headers, self._body = {}, bytearray()
        self._script.received.append(request)
        outcome = self._script.answer(request, self.transport)
        if outcome is not None:
            self._script.tasks.add(asyncio.ensure_future(outcome))


async def serve(script: Script, tls: ssl.SSLContext | None = None) -> tuple[asyncio.Server, int]:
    """The server on 127.0.0.1 and its port."""
    server = await asyncio.get_running_loop().create_server(lambda: _ScriptedProtocol(script), "127.0.0.1", 0,
                                                            ssl=tls)
    return server, server.sockets[0].getsockname()[1]


def answer_bytes(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    """A whole answer, with a Content-Length unless ``headers`` frame the body otherwise."""
    lines = [f"HTTP/1.1 {status}", *headers]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def fixed(raw: bytes) -> Callable[[Received, asyncio.Transport], None]:
    """A script answering every request with the same bytes."""
    return lambda _request, transport: transport.write(raw)


class EarlyRefusal(asyncio.Protocol):
    """A server's protocol that answers 413 as soon as a request's first bytes are in, then closes
    or stops reading (the rest of the body never read); ``connections`` counts its connections."""

    def __init__(self, then_close: bool, connections: list[int]) -> None:
        self._then_close = then_close
        self._answered = False
        connections.append(len(connections))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self._answered:
            self._answered = True
            self.transport.write(answer_bytes(b'{"error":"too large"}', status="413 Payload Too Large"))
            if self._then_close:
                self.transport.close()
            else:
                self.transport.pause_reading()
