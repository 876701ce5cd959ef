"""The one way the gateway makes a Redis client (rate limits, auth change messages, ``/readyz``).

Every command gives up after ``timeout_s`` (a hung Redis costs a call that long, not the client's
default seconds), and a command whose connection turns out dropped (Redis restarted: every pooled
connection is dead, each would fail one command) reconnects and is sent once more. A timeout is not
retried: a Redis that does not answer once will not answer the same command a moment later.
"""

from __future__ import annotations

from typing import Any


def redis_client(url: str, timeout_s: float | None) -> Any:
    """``redis.asyncio.Redis`` for ``url``; ``timeout_s`` None only for a subscriber, whose reads
    wait for messages as long as none come (its connect still times out)."""
    import redis.asyncio as aioredis
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    return aioredis.from_url(url, socket_connect_timeout=timeout_s or 2.0, socket_timeout=timeout_s,
                             retry=Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))
