"""Where the response cache keeps its entries: the gateway's database (a table, SQLite or
PostgreSQL), or Redis when the config names one (shared by every replica, and off the database's
write path).

Both evict oldest-first (by the time an entry was kept; a hit writes nothing) once over
``max_entries`` or ``max_bytes``, and both forget entries past the TTL. The TTL is judged by the
cache's own clock on every read too (``ResponseCache``), so an entry that a backend has not
dropped yet is never served late.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

from gateway.api.accounts import Storage
from gateway.api.ops import Outage, redis_client

log = logging.getLogger("plugins.cache")


class Bounds(Protocol):
    ttl_s: float
    max_entries: int
    max_bytes: int


class Entries(Protocol):
    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, user_id: int, entry: bytes, created_at: float, bounds: Bounds) -> int:
        """Keep ``entry``; how many entries were evicted."""
        ...

    async def close(self) -> None: ...


class SqlEntries:
    """The ``response_cache`` table (migration 0015) of the gateway's own database."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    async def get(self, key: str) -> bytes | None:
        entry = await self._storage.cached_answer(key)
        return None if entry is None else entry.encode()

    async def put(self, key: str, user_id: int, entry: bytes, created_at: float, bounds: Bounds) -> int:
        return await self._storage.keep_answer(key, user_id, entry.decode(), created_at,
                                               expired_before=created_at - bounds.ttl_s,
                                               max_entries=bounds.max_entries, max_bytes=bounds.max_bytes)

    async def close(self) -> None:
        return None


# One script, so that what every replica keeps stays within the bounds: expired entries go, the
# entry is written (replacing one of its key), then the oldest go while over a bound. KEYS: the
# order (sorted set, score = when kept, ms), the sizes (hash), the total size (counter). ARGV: the
# entry's member name, its value, when kept (ms), its TTL (ms), kept before this = expired (ms),
# max entries, max bytes, the prefix of entry keys.
_PUT = """
local order, sizes, total_key = KEYS[1], KEYS[2], KEYS[3]
local member, value, now_ms, ttl_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local max_entries, max_bytes, prefix = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local function drop(m)
  local size = tonumber(redis.call('HGET', sizes, m) or '0')
  redis.call('HDEL', sizes, m)
  redis.call('ZREM', order, m)
  redis.call('DEL', prefix .. m)
  redis.call('DECRBY', total_key, size)
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', order, '-inf', '(' .. ARGV[5])) do drop(m) end
if redis.call('ZSCORE', order, member) then drop(member) end
redis.call('SET', prefix .. member, value, 'PX', ttl_ms)
redis.call('ZADD', order, now_ms, member)
redis.call('HSET', sizes, member, string.len(value))
local total = redis.call('INCRBY', total_key, string.len(value))
local evicted = 0
while redis.call('ZCARD', order) > max_entries or total > max_bytes do
  local oldest = redis.call('ZRANGE', order, 0, 0)
  if #oldest == 0 then break end
  drop(oldest[1])
  total = tonumber(redis.call('GET', total_key) or '0')
  evicted = evicted + 1
end
return evicted
"""


class RedisEntries:
    """Entries in Redis under ``prefix``: ``<prefix>e:<key>`` each (with Redis's own expiry as
    well), and the order, sizes and total size that bound them. A Redis that does not answer is a
    miss and a write skipped, never a failed call (logged once per outage)."""

    def __init__(self, url: str, prefix: str, timeout_s: float) -> None:
        self._client: Any = redis_client(url, timeout_s)
        self._put: Any = self._client.register_script(_PUT)
        self._prefix = prefix
        self._keys = [f"{prefix}order", f"{prefix}sizes", f"{prefix}bytes"]
        self.outage = Outage("Redis (response cache)", log, logging.WARNING,
                             "calls are not answered from the cache until it answers")

    async def get(self, key: str) -> bytes | None:
        from redis.exceptions import RedisError

        began = time.monotonic()
        try:
            value = await self._client.get(f"{self._prefix}e:{key}")
        except (RedisError, OSError) as exc:
            self.outage.failed(exc)
            return None
        self.outage.answered(began)
        return None if value is None else bytes(value)

    async def put(self, key: str, user_id: int, entry: bytes, created_at: float, bounds: Bounds) -> int:
        from redis.exceptions import RedisError

        now_ms = int(created_at * 1000)
        ttl_ms = max(int(bounds.ttl_s * 1000), 1)
        began = time.monotonic()
        try:
            evicted = await self._put(keys=self._keys, args=[
                f"e:{key}", entry, now_ms, ttl_ms, now_ms - ttl_ms, bounds.max_entries, bounds.max_bytes,
                self._prefix])
        except (RedisError, OSError) as exc:
            self.outage.failed(exc)
            return 0
        self.outage.answered(began)
        return int(evicted)

    async def close(self) -> None:
        await self._client.aclose()
