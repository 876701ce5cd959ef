"""What the HTTP/1 server protocol costs per request, without sockets: uvicorn's own httptools
protocol and the gateway's (``gateway.uvicorn_protocol``), each fed the same keep-alive request
and answering it from a trivial ASGI app, alternated block by block in one process (so that the
machine's drift affects both alike).

    .venv/bin/python -m bench.protocol_cost [--requests 5000] [--blocks 12] [LABEL=PATH ...]

``LABEL=PATH`` adds the ``GatewayHttpTools`` of another copy of ``uvicorn_protocol.py`` (e.g. a
``git worktree`` of an earlier commit), to measure a change of the protocol alone. Figures: wall
time per request (one process, nothing else runs), minimum and median of the blocks.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import time
from typing import Any

import uvloop
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from bench.measure import in_turn
from gateway.uvicorn_protocol import GatewayHttpTools

BODY = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}' * 8
REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAuthorization: Bearer sk-x\r\n"
           b"Content-Type: application/json\r\nContent-Length: 20\r\n\r\n" + b'{"model":"sim-chat"}')


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BODY})


class MemoryTransport(asyncio.Transport):
    """A connection's transport that keeps nothing: it resolves ``answered`` when a response's last
    bytes are written."""

    def __init__(self) -> None:
        super().__init__()
        self.answered: asyncio.Future[None] | None = None
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if bytes(data[-16:]).endswith(BODY[-16:]) and self.answered is not None:
            self.answered.set_result(None)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass


def _protocol_of(path: str, label: str) -> type[HttpToolsProtocol]:
    spec = importlib.util.spec_from_file_location(f"protocol_cost_{label}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls: type[HttpToolsProtocol] = module.GatewayHttpTools
    return cls


async def _block(cls: type[HttpToolsProtocol], requests: int) -> float:
    """Microseconds per request over ``requests`` served one after another on one connection."""
    loop = asyncio.get_running_loop()
    config = Config(app=app, loop="none", http=cls, timeout_keep_alive=5, access_log=False,
                    lifespan="off", proxy_headers=False)
    config.load()
    protocol = cls(config=config, server_state=ServerState(), app_state={})
    transport = MemoryTransport()
    protocol.connection_made(transport)
    started = time.perf_counter()
    for _ in range(requests):
        transport.answered = loop.create_future()
        protocol.data_received(REQUEST)
        await transport.answered
    elapsed = time.perf_counter() - started
    protocol.connection_lost(None)
    return elapsed / requests * 1e6


async def measure(variants: dict[str, type[HttpToolsProtocol]], requests: int,
                  blocks: int) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {name: [] for name in variants}
    await _block(HttpToolsProtocol, requests)  # warm up
    for block in range(blocks):
        for _, (name, cls) in in_turn(list(variants.items()), block):
            figures[name].append(await _block(cls, requests))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("other", nargs="*", help="LABEL=PATH of another uvicorn_protocol.py")
    args = parser.parse_args()
    variants: dict[str, type[HttpToolsProtocol]] = {"uvicorn": HttpToolsProtocol, "gateway": GatewayHttpTools}
    for item in args.other:
        label, _, path = item.partition("=")
        variants[label] = _protocol_of(path, label)
    figures = uvloop.run(measure(variants, args.requests, args.blocks))
    print(f"HTTP/1 protocol, {args.requests} keep-alive requests x {args.blocks} blocks, us per request")
    print("| protocol | min | median |\n|---|---:|---:|")
    for name, values in figures.items():
        print(f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
