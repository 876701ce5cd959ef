"""What reading an upstream's answer costs the event loop (``python -m bench.upstream_reads``):

* a gzip bomb (about 290 KB inflating to 300 MB of JSON) read whole through ``UpstreamClient``
  under the default body limit (64 MiB, then refused), three times, with a task beside it that
  ticks every millisecond: the longest gap between two ticks is how long every other call of the
  process waited at worst;
* a 20 MB plain JSON body read whole, best of 15 rounds of process CPU (client and server in this
  one process).

The upstream is a minimal asyncio server on the loopback that sends its bytes as fast as it can.
"""

from __future__ import annotations

import asyncio
import time
import zlib

from gateway.settings.config import LimitsConfig, UpstreamTimeouts
from gateway.upstream.client import AnswerTooLarge, Destination, UpstreamClient

MIB = 1024 * 1024


def gzip_bomb(decoded_bytes: int = 300_000_000) -> bytes:
    """About 290 KB of gzip that inflates to ``decoded_bytes`` of (valid) JSON (the hostile tests'
    bomb too)."""
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * MIB
    parts = [pack.compress(b'{"id":"c","object":"chat.completion","pad":"')]
    parts += [pack.compress(block) for _ in range(decoded_bytes // MIB)]
    parts += [pack.compress(b'"}'), pack.flush()]
    return b"".join(parts)


def _server(head: bytes, body: bytes) -> asyncio.Future[asyncio.Server]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)  # the request's "{}"
                writer.write(head % len(body))
                writer.write(body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    return asyncio.ensure_future(asyncio.start_server(answer, "127.0.0.1", 0))


async def _read(client: UpstreamClient, port: int) -> None:
    answer = await client.request("POST", Destination(f"http://127.0.0.1:{port}/v1/chat/completions", {}),
                                  {"Content-Length": "2"}, b"{}", UpstreamTimeouts())
    try:
        await answer.read()
        answer.release()
    except AnswerTooLarge:
        pass


async def bomb_gaps(client: UpstreamClient) -> None:
    server = await _server(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                           b"Content-Length: %d\r\n\r\n", gzip_bomb())
    port = server.sockets[0].getsockname()[1]
    gaps: list[float] = []
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(tick())
    for _ in range(3):
        began = time.perf_counter()
        await _read(client, port)
        print(f"gzip bomb: read and refused in {(time.perf_counter() - began) * 1000:.0f} ms")
    done = True
    await ticking
    print(f"gzip bomb: longest event-loop gap {max(gaps) * 1000:.1f} ms")
    server.close()


async def plain_body_cpu(client: UpstreamClient) -> None:
    body = b"[" + b"0.0123456789," * (20_000_000 // 13) + b"0]"
    server = await _server(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
                           body)
    port = server.sockets[0].getsockname()[1]
    best = float("inf")
    for _ in range(15):
        began = time.process_time()
        await _read(client, port)
        best = min(best, time.process_time() - began)
    print(f"20 MB plain body: {best * 1000:.1f} ms of CPU (best of 15)")
    server.close()


async def main() -> None:
    client = UpstreamClient(LimitsConfig())
    await client.start()
    try:
        await bomb_gaps(client)
        await plain_body_cpu(client)
    finally:
        await client.stop()


if __name__ == "__main__":
    asyncio.run(main())
