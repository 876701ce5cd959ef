"""The four call hooks as a third-party plugin sees them (``gateway.hooks.specs``): registered with
the app, they turn ``Gateway.observes_calls`` on and are called in the call's order, across
failover; a header an attempt adds reaches the upstream."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import openai

from gateway.api import hookimpl
from gateway.api.accounts import RequestLog
from gateway.api.relay import CallContext, Target

from .conftest import nonce, telemetry_models, telemetry_upstreams, upstream_headers

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway


class Recorder:
    """Each hook call, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    @hookimpl
    def gateway_call_started(self, ctx: CallContext, headers: Mapping[str, str]) -> None:
        ctx.trace = self
        self.seen.append(("call", ctx.model.id, headers.get("x-probe")))

    @hookimpl
    def gateway_attempt_started(
        self, ctx: CallContext, target: Target, number: int, headers: dict[str, str]
    ) -> None:
        assert ctx.trace is self
        headers["x-attempt"] = str(number)
        self.seen.append(("attempt", number, target.name))

    @hookimpl
    def gateway_attempt_ended(
        self, ctx: CallContext, target: Target, status: int | None, error: str | None
    ) -> None:
        self.seen.append(("ended", target.name, status, error))

    @hookimpl
    def gateway_call_finished(self, ctx: CallContext, log: RequestLog) -> None:
        self.seen.append(("finished", log.outcome, log.upstream, log.attempts))


async def test_a_plugin_follows_each_call(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    recorder = Recorder()
    config = make_config(
        extra_models=telemetry_models(),
        extra_upstreams=telemetry_upstreams(simulator.base_url),
        routing={"max_attempts": 2, "cooldown_s": 0.001},
    )
    gw: GatewayHandle = await gateway_server(config, extra_plugins=[recorder])
    assert gw.gateway.observes_calls is True
    user = await gw.create_user()
    key = (await gw.create_key(user["id"]))["key"]
    client = openai.AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=key, max_retries=0, default_headers={"X-Probe": "yes"}
    )
    prompt = nonce()
    await client.chat.completions.create(model="t-flaky", messages=[{"role": "user", "content": prompt}])
    await gw.gateway.meter.flush()
    assert recorder.seen == [
        ("call", "t-flaky", "yes"),
        ("attempt", 1, "t-broken"),
        ("ended", "t-broken", 503, "answered HTTP 503"),
        ("attempt", 2, "t-up"),
        ("ended", "t-up", 200, None),
        ("finished", "success", "t-up", 2),
    ]
    assert [h["x-attempt"] for h in await upstream_headers(simulator.base_url, prompt)] == ["1", "2"]
