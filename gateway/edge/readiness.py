"""``GET /readyz``: whether this process can serve calls now, for a load balancer's health check.

``/healthz`` says the process is up (it answers while the database is down, so that an
orchestrator does not restart a replica an outage would not cure); ``/readyz`` asks the shared
services every call needs: the database (one small read) and, when ``redis`` is configured, Redis
(a PING, as the rate limits' client sends it). 200 when both answer, else 503 naming what is down
(the reasons stay in the log: this route takes no credentials).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

from gateway.accounts.ratelimit import RedisBackend, limiter_of
from gateway.edge.http import get_gateway, json_response
from gateway.edge.openapi import documented
from gateway.runtime.context import Gateway
from gateway.runtime.errors import ServiceUnavailable

DATABASE_CHECK_S = 2.0  # a database slower than this to answer one small read is not ready


async def _answers(check: Callable[[], Awaitable[None]], timeout_s: float) -> bool:
    try:
        await asyncio.wait_for(check(), timeout_s)
    except Exception:  # whatever it is, the service is not usable now; the storage logs outages
        return False
    return True


async def readiness(gateway: Gateway) -> dict[str, bool]:
    """Each shared service this process needs, and whether it answers now."""
    checks = {"database": _answers(gateway.storage.ping, DATABASE_CHECK_S)}
    if gateway.config.redis:
        backend = limiter_of(gateway).backend
        if isinstance(backend, RedisBackend):
            # its own command timeout bounds it; the outer one only guards against a bug
            checks["redis"] = _answers(backend.ping, gateway.config.ratelimit.redis_timeout_s * 4)
    results = await asyncio.gather(*checks.values())
    return dict(zip(checks, results, strict=True))


@documented("Readiness: 503 naming the shared service (database, Redis) that does not answer", public=True)
async def readyz(request: Request) -> Response:
    gateway = get_gateway(request)
    if gateway.lifecycle.draining:  # stopping (SIGTERM): the load balancer should send no more
        return json_response({"status": "shutting_down", "down": [], "checks": {}},
                             ServiceUnavailable.status, headers={"retry-after": "1"})
    checks = await readiness(gateway)
    down = sorted(name for name, ok in checks.items() if not ok)
    body = {"status": "unavailable" if down else "ready", "down": down,
            "checks": {name: "ok" if ok else "down" for name, ok in checks.items()}}
    if not down:
        return json_response(body)
    return json_response(body, ServiceUnavailable.status,
                         headers={"retry-after": str(ServiceUnavailable.retry_after_s)})
