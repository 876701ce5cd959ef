"""The response cache (issue 36 point 4, CONTRACT 7), a built-in plugin through the relay's two
cache hooks (``gateway_cache_lookup``, ``gateway_cache_store``; the relay's side is
``gateway.relay.cache_serve``).

* Opt-in: ``cache.enabled`` in the config serves every key; a key's own ``cache: true`` serves
  that key when the config leaves it off. A call the cache does not serve costs one hook call.
* Exact match, per user: an entry's name (``keys.entry_key``) holds the user id, the model asked
  for, the family and the canonical body minus ``stream``; a kept entry names its user, checked
  again on a hit. Entries are never shared across users.
* ``Cache-Control: no-cache`` goes to the upstream (and keeps the fresh answer); ``no-store``
  neither reads nor keeps.
* Within ``ttl_s`` by this plugin's clock (``ResponseCache.clock``, the tests' seam); kept in the
  database, or in Redis when ``redis`` is set (``backends``), bounded by ``max_entries`` and
  ``max_bytes`` (oldest first) and ``entry_bytes`` per answer.
* Only complete answers are kept: the relay never hands over an error, a cut stream or a stream
  the client left. Keeping is off the request path: a bounded set of background writes.
* What a hit is charged (``hit_price_ratio``) and how it is logged is the relay's
  (``gateway.relay.cache_serve``): docs/money.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
from starlette.requests import Request

from gateway.api import ClientCall, Gateway, hookimpl
from gateway.api.accounts import Principal
from gateway.api.canonical import ChatResponse
from gateway.api.relay import CacheLookup, KeptAnswer, off_loop
from plugins.cache.backends import Entries, RedisEntries, SqlEntries
from plugins.cache.keys import directives, entry_key

EXTENSION = "cache"
PENDING_MAX = 64  # answers being written at once; past this an answer is not kept (logged)
log = logging.getLogger("plugins.cache")
_ENCODE = msgspec.json.Encoder()
_DECODE = msgspec.json.Decoder(KeptAnswer)


class ResponseCache:
    """The cache of one running gateway (``gateway.extensions["cache"]``)."""

    def __init__(self, gateway: Gateway, entries: Entries) -> None:
        self._gateway = gateway
        self.entries = entries
        self.clock: Callable[[], float] = time.time  # Unix seconds; tests move it
        self._pending: set[asyncio.Task[None]] = set()
        self.kept = 0  # answers written
        self.evicted = 0  # entries evicted to stay within the bounds
        self.skipped = 0  # answers not kept: too large, or too many writes pending

    def serves(self, principal: Principal) -> bool:
        return self._gateway.config.cache.enabled or principal.key.cache_responses

    async def lookup(self, request: Request, principal: Principal, call: ClientCall,
                     family: str) -> CacheLookup | None:
        settings = self._gateway.config.cache
        asked = directives(call.headers.get("cache-control"))
        user_id = principal.user.id
        # A large body is put in canonical form off the event loop, as the relay decodes one.
        key = await off_loop(request, len(call.body), lambda: entry_key(user_id, call.view.model, family,
                                                                          call.body))
        if key is None:
            return None
        lookup = CacheLookup(key=key, store=asked.keep_answer, hit_price_ratio=settings.hit_price_ratio,
                             entry_bytes=min(settings.entry_bytes, settings.max_bytes))
        if not asked.answer_from_cache:
            return lookup
        raw = await self.entries.get(key)
        if raw is None:
            return lookup
        try:
            kept = _DECODE.decode(raw)
        except msgspec.DecodeError:
            log.warning("an unreadable response-cache entry was ignored (%d bytes)", len(raw))
            return lookup
        fresh = self.clock() - kept.created_at < settings.ttl_s
        if kept.user_id == user_id and fresh:
            lookup.hit = kept
        return lookup

    def keep(self, lookup: CacheLookup, user_id: int, response: ChatResponse) -> None:
        entry = _ENCODE.encode(KeptAnswer(response=response, user_id=user_id, created_at=self.clock()))
        if len(entry) > lookup.entry_bytes or len(self._pending) >= PENDING_MAX:
            self.skipped += 1
            return
        task = asyncio.ensure_future(self._write(lookup.key, user_id, entry))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _write(self, key: str, user_id: int, entry: bytes) -> None:
        try:
            bounds = self._gateway.config.cache
            self.evicted += await self.entries.put(key, user_id, entry, self.clock(), bounds)
            self.kept += 1
        except Exception:  # a cache that cannot write is a cache that misses, never a failed call
            log.exception("could not keep an answer in the response cache")

    async def drained(self) -> None:
        """Every answer handed over so far is written (or given up)."""
        while self._pending:
            await asyncio.wait(list(self._pending))

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.drained(), 5.0)
        await self.entries.close()


def cache_of(gateway: Gateway) -> ResponseCache | None:
    cache = gateway.extensions.get(EXTENSION)
    return cache if isinstance(cache, ResponseCache) else None


def _entries(gateway: Gateway) -> Entries:
    config = gateway.config
    if config.redis:
        return RedisEntries(config.redis, config.cache.redis_prefix, config.ratelimit.redis_timeout_s)
    return SqlEntries(gateway.storage)


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    gateway.extensions[EXTENSION] = ResponseCache(gateway, _entries(gateway))


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    cache = cache_of(gateway)
    if cache is not None:
        await cache.close()


@hookimpl
def gateway_cache_lookup(gateway: Gateway, request: Request, principal: Principal, call: ClientCall,
                         family: str) -> Awaitable[CacheLookup | None] | None:
    cache = cache_of(gateway)
    if cache is None or not cache.serves(principal):
        return None
    return cache.lookup(request, principal, call, family)


@hookimpl
def gateway_cache_store(gateway: Gateway, lookup: CacheLookup, user_id: int, response: ChatResponse) -> None:
    cache = cache_of(gateway)
    if cache is not None:
        cache.keep(lookup, user_id, response)
