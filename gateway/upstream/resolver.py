"""Host names of upstreams resolved once per ``TTL_S`` for the relay's HTTP/1.1 client.

Every new connection to ``api.openai.com`` would otherwise ask the system's resolver again: a hop to
the event loop's thread pool and, without a local cache, a DNS round trip, at the moment a burst
of calls opens many connections at once. Like aiohttp's connector (10 s by default), answers are
kept ``TTL_S`` seconds; lookups of one name in flight at the same time share one question; a failed
lookup is not kept (the next connection asks again). An IP address is used as it is.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable

TTL_S = 10.0

Lookup = Callable[[str, int], Awaitable[list[str]]]


async def system_lookup(host: str, port: int) -> list[str]:
    """The addresses of ``host`` for a TCP connection, in the system's order of preference."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class Resolver:
    def __init__(self, lookup: Lookup = system_lookup, ttl_s: float = TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lookup = lookup
        self._ttl_s = ttl_s
        self._clock = clock
        self._known: dict[tuple[str, int], tuple[float, list[str]]] = {}  # -> (expires, addresses)
        self._asking: dict[tuple[str, int], asyncio.Future[list[str]]] = {}

    async def addresses(self, host: str, port: int) -> list[str]:
        """``host``'s addresses (``[host]`` for an IP address); raises ``OSError`` when it has none."""
        if is_address(host):
            return [host]
        name = (host, port)
        known = self._known.get(name)
        if known is not None and known[0] > self._clock():
            return known[1]
        asking = self._asking.get(name)
        if asking is None:
            asking = self._asking[name] = asyncio.ensure_future(self._ask(name))
            asking.add_done_callback(lambda _: self._asking.pop(name, None))
        # shield: one caller's timeout must not cancel the question the others wait for
        return await asyncio.shield(asking)

    def forget(self, host: str, port: int) -> None:
        """Drop what is known of ``host``: none of its addresses took a connection (it may have
        moved)."""
        self._known.pop((host, port), None)

    async def _ask(self, name: tuple[str, int]) -> list[str]:
        found = await self._lookup(*name)
        if not found:
            raise OSError(f"{name[0]} has no address")
        self._known[name] = (self._clock() + self._ttl_s, found)
        return found
