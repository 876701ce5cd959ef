"""Rate limits with a Redis that is not there (nothing listens on its port): the documented policy
``ratelimit.on_redis_error`` decides, each call so decided is counted in ``/metrics``, the outage
is one WARNING however many calls it touches, ``/readyz`` names Redis, and keys without limits
never notice (issue 38, point 2). The chaos tests (tests/chaos) stop, hang and restart a real one.
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING

import pytest

from tests.serving import free_port

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

CHAT = {"model": "sim-chat", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def _metric(text: str, line_start: str) -> float:
    match = re.search(rf"^{re.escape(line_start)} (\S+)$", text, re.MULTILINE)
    assert match, f"{line_start} not in /metrics"
    return float(match.group(1))


@pytest.mark.parametrize("policy", ["allow", "deny"])
async def test_unreachable_redis_follows_the_policy(
        gateway_server: StartGateway, make_config: MakeConfig, caplog: pytest.LogCaptureFixture,
        policy: str) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.accounts.ratelimit")
    began = time.monotonic()
    gw = await gateway_server(make_config(redis=f"redis://127.0.0.1:{free_port()}/0",
                                          ratelimit={"on_redis_error": policy}))
    assert time.monotonic() - began < 2.5  # start does not wait for the auth channel's Redis
    user = await gw.create_user()
    limited = (await gw.create_key(user["id"], rpm=1))["key"]
    free = (await gw.create_key(user["id"]))["key"]
    replies = [await gw.request("POST", "/v1/chat/completions", json=CHAT, key=limited) for _ in range(3)]
    if policy == "allow":
        assert [r.status for r in replies] == [200, 200, 200]  # rpm=1 cannot be counted: served
    else:
        assert [r.status for r in replies] == [503, 503, 503]
        assert all(r.json()["error"]["code"] == "service_unavailable" for r in replies)
        assert all(r.headers["Retry-After"] == "2" for r in replies)
    unlimited = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=free)
    assert unlimited.status == 200
    ready = await gw.request("GET", "/readyz")
    assert (ready.status, ready.json()["down"]) == (503, ["redis"])
    assert ready.json()["checks"] == {"database": "ok", "redis": "down"}
    metrics = (await gw.request("GET", "/metrics")).text
    decision = "allowed" if policy == "allow" else "refused"
    assert _metric(metrics, f'gateway_ratelimit_redis_unavailable_total{{decision="{decision}"}}') == 3
    assert _metric(metrics, 'gateway_dependency_up{dependency="redis"}') == 0
    warnings = [r for r in caplog.records
                if r.name == "gateway.accounts.ratelimit" and "Redis unavailable" in r.message]
    assert len(warnings) == 1, [r.message for r in warnings]


async def test_readyz_when_all_is_well(gw: GatewayHandle) -> None:
    ready = await gw.request("GET", "/readyz")
    assert ready.status == 200
    assert ready.json() == {"status": "ready", "down": [], "checks": {"database": "ok"}}
