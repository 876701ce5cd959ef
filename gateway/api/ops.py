"""What the operations plugins (metrics) read of the running gateway: the HTTP and call statistics
of ``gateway.runtime.observe``, the database and Redis outage state, and the rate limiter's."""

from __future__ import annotations

from gateway.accounts.ratelimit import EXTENSION as RATE_LIMIT_EXTENSION
from gateway.accounts.ratelimit import RateLimiter, RedisBackend
from gateway.runtime.observe import group_of, http_stats
from gateway.runtime.outage import Outage

__all__ = [
    "RATE_LIMIT_EXTENSION",
    "Outage",
    "RateLimiter",
    "RedisBackend",
    "group_of",
    "http_stats",
]
