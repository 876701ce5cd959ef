"""Upstream host names resolved once per TTL for the relay's HTTP/1.1 client
(``gateway.upstream.resolver``): shared questions, answers kept for their TTL and no longer, a
failed lookup never kept, the addresses tried in order, and an upstream that moved asked again."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.upstream.http1 import ConnectFailed, Destination, Http1Client
from gateway.upstream.resolver import Resolver, system_lookup


class Lookups:
    """A resolver's lookup that answers from ``table`` and counts the questions."""

    def __init__(self, table: dict[str, list[str]], delay_s: float = 0.0) -> None:
        self.table = table
        self.delay_s = delay_s
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        await asyncio.sleep(self.delay_s)
        if host not in self.table:
            raise OSError(f"unknown host {host}")
        return self.table[host]


async def test_an_answer_is_kept_for_its_ttl_and_shared_by_questions_in_flight() -> None:
    now = [100.0]
    lookups = Lookups({"api.example": ["10.0.0.1", "10.0.0.2"]}, delay_s=0.01)
    resolver = Resolver(lookups, ttl_s=10.0, clock=lambda: now[0])
    answers = await asyncio.gather(*(resolver.addresses("api.example", 443) for _ in range(5)))
    assert answers == [["10.0.0.1", "10.0.0.2"]] * 5 and lookups.asked == ["api.example"]
    now[0] += 9.9
    assert await resolver.addresses("api.example", 443) == ["10.0.0.1", "10.0.0.2"]
    assert len(lookups.asked) == 1
    now[0] += 0.2  # past the TTL: asked again
    await resolver.addresses("api.example", 443)
    assert len(lookups.asked) == 2
    resolver.forget("api.example", 443)
    await resolver.addresses("api.example", 443)
    assert len(lookups.asked) == 3


async def test_a_failed_lookup_is_not_kept_and_an_address_is_not_looked_up() -> None:
    lookups = Lookups({})
    resolver = Resolver(lookups)
    for _ in range(2):
        with pytest.raises(OSError, match="unknown host"):
            await resolver.addresses("nowhere.example", 443)
    assert lookups.asked == ["nowhere.example", "nowhere.example"]
    assert await resolver.addresses("127.0.0.1", 80) == ["127.0.0.1"]
    assert await resolver.addresses("::1", 80) == ["::1"]
    assert len(lookups.asked) == 2


async def test_a_caller_that_gives_up_does_not_cancel_the_others_question() -> None:
    lookups = Lookups({"slow.example": ["10.0.0.9"]}, delay_s=0.05)
    resolver = Resolver(lookups)
    impatient = asyncio.ensure_future(resolver.addresses("slow.example", 443))
    patient = asyncio.ensure_future(resolver.addresses("slow.example", 443))
    await asyncio.sleep(0.01)
    impatient.cancel()
    assert await patient == ["10.0.0.9"] and lookups.asked == ["slow.example"]


async def test_the_system_resolves_localhost() -> None:
    assert "127.0.0.1" in await system_lookup("localhost", 80)


async def _listening() -> tuple[asyncio.Server, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """``ok`` to each request (whose body is ``{}``) until the client closes."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"{}"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_the_client_connects_by_name_through_the_cache_trying_each_address() -> None:
    server, port = await _listening()
    # The first address refuses (nothing listens on 127.0.0.2): the second takes the connection.
    lookups = Lookups({"upstream.test": ["127.0.0.2", "127.0.0.1"]})
    client = Http1Client(resolver=Resolver(lookups))
    destination = Destination(f"http://upstream.test:{port}/v1/chat/completions", {})
    try:
        answers = await asyncio.gather(*(client.post(destination.origin, destination.head_with({}), b"{}",
                                                     connect_s=2, first_byte_s=5, idle_s=2)
                                         for _ in range(3)))
        for answer in answers:  # three connections at once, one question
            assert await answer.read() == b"ok"
            answer.release()
        assert lookups.asked == ["upstream.test"]
    finally:
        client.close()
        server.close()


async def test_an_upstream_none_of_whose_addresses_answers_is_asked_again() -> None:
    server, port = await _listening()
    server.close()
    await server.wait_closed()
    lookups = Lookups({"gone.test": ["127.0.0.1"]})
    client = Http1Client(resolver=Resolver(lookups))
    destination = Destination(f"http://gone.test:{port}/v1/chat/completions", {})
    try:
        for _ in range(2):
            with pytest.raises(ConnectFailed, match=r"cannot connect to gone\.test"):
                await client.post(destination.origin, destination.head_with({}), b"{}", connect_s=2,
                                  first_byte_s=5, idle_s=2)
        assert lookups.asked == ["gone.test", "gone.test"]  # it may have moved: not kept after a failure
        with pytest.raises(ConnectFailed, match="unknown host"):
            bad = Destination(f"http://nowhere.test:{port}/v1/chat/completions", {})
            await client.post(bad.origin, bad.head_with({}), b"{}", connect_s=2, first_byte_s=5, idle_s=2)
    finally:
        client.close()
