"""What the operations plugins (metrics) read of the running gateway: the HTTP and call statistics
of ``gateway.runtime.observe``, the database and Redis outage state, the rate limiter's state and
the request log's retention."""

from __future__ import annotations

from gateway.accounts.metering.retention import RETENTION as LOG_RETENTION_EXTENSION
from gateway.accounts.metering.retention import LogRetention
from gateway.accounts.ratelimit import EXTENSION as RATE_LIMIT_EXTENSION
from gateway.accounts.ratelimit import RateLimiter, RedisBackend
from gateway.runtime.observe import group_of, http_stats
from gateway.runtime.outage import Outage
from gateway.runtime.redis_client import redis_client

__all__ = [
    "LOG_RETENTION_EXTENSION",
    "RATE_LIMIT_EXTENSION",
    "LogRetention",
    "Outage",
    "RateLimiter",
    "RedisBackend",
    "group_of",
    "http_stats",
    "redis_client",
]
