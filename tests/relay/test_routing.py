"""Routing through HTTP with the openai SDK: failover, cool-down, weights, what is never retried,
what goes upstream, and a client hanging up mid-stream."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import aiohttp
import openai
import pytest

from gateway.accounts.records import RequestLog
from gateway.hooks.specs import hookimpl


class LogSink:
    """A test plugin: every finished call's request-log record."""

    def __init__(self) -> None:
        self.logs: list[RequestLog] = []
        self._changed = asyncio.Condition()

    @hookimpl
    def gateway_request_finished(self, gateway: Any, log: RequestLog) -> None:
        self.logs.append(log)
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(5.0), self._changed:
            await self._changed.wait_for(lambda: len(self.logs) >= count)


HA_MODEL = {"id": "ha-chat", "owned_by": "test", "price": {"input_per_mtok": 0.5, "output_per_mtok": 1.5}}


def _upstream(name: str, base_url: str, key: str, priority: int = 0, weight: int = 1,
              **extra: Any) -> dict[str, Any]:
    return {"name": name, "protocol": "chat", "base_url": base_url, "api_key": key,
            "models": {"ha-chat": "sim-chat"}, "priority": priority, "weight": weight, **extra}


async def _start(gateway_server: Any, make_config: Any, upstreams: list[dict[str, Any]],
                 user_name: str = "router", **overrides: Any) -> tuple[Any, openai.AsyncOpenAI, LogSink]:
    sink = LogSink()
    config = make_config(extra_models=[HA_MODEL], extra_upstreams=upstreams, **overrides)
    handle = await gateway_server(config, extra_plugins=[sink])
    user = await handle.create_user(user_name, quota_usd=100)
    key = (await handle.create_key(user["id"], name="routing"))["key"]
    client = openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0)
    return handle, client, sink


async def _flush(handle: Any, sink: LogSink | None = None, count: int = 0) -> None:
    """Wait until ``count`` calls have finished (a stream finishes after its client read the end)
    and their settlements are written."""
    if sink is not None:
        await sink.wait_for(count)
    await handle.gateway.meter.flush()


def _ask(text: str = "hello sim:tokens=8") -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_failover_then_cooldown_then_recovery(gateway_server: Any, make_config: Any,
                                                    simulator: Any) -> None:
    base = simulator.base_url
    handle, client, sink = await _start(
        gateway_server, make_config,
        [_upstream("ha-broken", base, "sk-sim-fail503", priority=0), _upstream("ha-good", base, "sk-sim", 1)],
        routing={"max_attempts": 3, "cooldown_s": 0.5})

    reply = await client.chat.completions.create(model="ha-chat", messages=_ask())
    assert reply.choices[0].message.content.startswith("[simulated]")
    await _flush(handle)
    first = sink.logs[-1]
    assert (first.outcome, first.upstream, first.attempts) == ("success", "ha-good", 2)

    # The broken upstream is cooling down: the next call goes straight to the good one.
    stream = await client.chat.completions.create(model="ha-chat", messages=_ask(), stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text.startswith("[simulated]")
    await _flush(handle, sink, 2)
    assert (sink.logs[-1].upstream, sink.logs[-1].attempts) == ("ha-good", 1)

    # After the cool-down it is tried again first (and fails over again).
    await asyncio.sleep(0.6)
    await client.chat.completions.create(model="ha-chat", messages=_ask())
    await _flush(handle)
    assert (sink.logs[-1].upstream, sink.logs[-1].attempts) == ("ha-good", 2)


async def test_all_upstreams_failing_is_a_502_and_costs_nothing(gateway_server: Any, make_config: Any,
                                                                 simulator: Any) -> None:
    handle, client, sink = await _start(
        gateway_server, make_config, [_upstream("ha-broken", simulator.base_url, "sk-sim-fail503")],
        routing={"max_attempts": 2, "cooldown_s": 30})
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="ha-chat", messages=_ask())
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "upstream_error"
    await _flush(handle)
    log = sink.logs[-1]
    assert (log.outcome, log.attempts, log.charge_nano) == ("upstream_error", 2, 0)


async def test_upstream_4xx_is_relayed_not_retried(gateway_server: Any, make_config: Any,
                                                    simulator: Any) -> None:
    base = simulator.base_url
    handle, client, sink = await _start(
        gateway_server, make_config,
        [_upstream("ha-rejects", base, "sk-sim-fail400", 0), _upstream("ha-good", base, "sk-sim", 1)])
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="ha-chat", messages=_ask())
    assert "simulated failure" in caught.value.message
    await _flush(handle)
    log = sink.logs[-1]
    assert (log.outcome, log.attempts, log.upstream, log.charge_nano) == ("client_error", 1, "ha-rejects", 0)


async def test_first_byte_timeout_fails_over(gateway_server: Any, make_config: Any, simulator: Any) -> None:
    base = simulator.base_url
    quick = {"connect_s": 1.0, "first_byte_s": 0.3, "idle_s": 5.0}
    handle, client, sink = await _start(
        gateway_server, make_config,
        [_upstream("ha-hangs", base, "sk-sim-hang", 0, timeouts=quick),
         _upstream("ha-good", base, "sk-sim", 1)])
    started = time.monotonic()
    stream = await client.chat.completions.create(model="ha-chat", messages=_ask(), stream=True)
    chunks = [c async for c in stream]
    assert chunks and time.monotonic() - started < 3.0
    await _flush(handle, sink, 1)
    assert (sink.logs[-1].upstream, sink.logs[-1].attempts) == ("ha-good", 2)


async def test_weights_share_traffic_among_equal_priorities(gateway_server: Any, make_config: Any,
                                                            simulator: Any) -> None:
    base = simulator.base_url
    handle, client, sink = await _start(
        gateway_server, make_config,
        [_upstream("ha-heavy", base, "sk-sim-a", 0, weight=3), _upstream("ha-light", base, "sk-sim-b", 0, 1)])
    calls = (client.chat.completions.create(model="ha-chat", messages=_ask()) for _ in range(200))
    await asyncio.gather(*calls)
    await _flush(handle)
    counts = collections.Counter(log.upstream for log in sink.logs[-200:])
    assert counts["ha-heavy"] + counts["ha-light"] == 200
    assert 1.8 < counts["ha-heavy"] / counts["ha-light"] < 5.5  # 3:1 expected


async def test_what_goes_upstream(gateway_server: Any, make_config: Any, simulator: Any) -> None:
    """The upstream gets its own key and the request id, never the client's credentials."""
    handle, client, sink = await _start(gateway_server, make_config,
                                        [_upstream("ha-good", simulator.base_url, "sk-sim-own")])
    raw = await client.chat.completions.with_raw_response.create(model="ha-chat", messages=_ask())
    request_id = raw.headers["x-service-request-id"]
    await _flush(handle)
    assert sink.logs[-1].request_id == request_id
    async with aiohttp.ClientSession() as session, session.get(f"{simulator.base_url}/_sim/requests") as r:
        seen = [e for e in await r.json() if e["headers"].get("x-service-request-id") == request_id]
    assert len(seen) == 1
    headers = seen[0]["headers"]
    assert headers["authorization"] == "Bearer sk-sim-own"
    assert client.api_key not in str(headers)
    assert seen[0]["body_json_or_null"]["model"] == "sim-chat"  # the upstream's own id for ha-chat


async def test_client_disconnect_cancels_the_upstream_and_meters_what_was_generated(
        gateway_server: Any, make_config: Any, simulator: Any) -> None:
    handle, client, sink = await _start(gateway_server, make_config,
                                        [_upstream("ha-slow", simulator.base_url, "sk-sim-tok30")])
    raw = await client.chat.completions.with_raw_response.create(
        model="ha-chat", messages=_ask("tell me a long story sim:tokens=200"), stream=True)
    request_id = raw.headers["x-service-request-id"]
    stream = raw.parse()
    received = 0
    async for _chunk in stream:
        received += 1
        if received == 5:
            break
    await stream.close()

    deadline = time.monotonic() + 3.0
    outcome = None
    while outcome != "cancelled" and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        outcome = await _simulator_outcome(simulator.base_url, request_id)
    assert outcome == "cancelled"  # the upstream stopped generating (200 tokens would take 6 s)
    await _flush(handle, sink, 1)
    log = next(log for log in sink.logs if log.request_id == request_id)
    assert log.outcome == "client_disconnect"
    assert 0 < log.completion_tokens < 200 and log.charge_nano > 0


async def _simulator_outcome(base_url: str, request_id: str) -> str | None:
    async with aiohttp.ClientSession() as session, session.get(f"{base_url}/_sim/requests") as r:
        entries = [e for e in await r.json() if e["headers"].get("x-service-request-id") == request_id]
    return entries[0]["outcome"] if entries else None


async def test_models_listing_follows_the_key_allowlist(gw: Any) -> None:
    limited = await gw.create_key(gw.user["id"], name="limited", models=["sim-chat", "sim-claude"])
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=limited["key"], max_retries=0)
    listed = [m.id async for m in client.models.list()]
    assert sorted(listed) == ["sim-chat", "sim-claude"]
    model = await client.models.retrieve("sim-chat")
    assert (model.id, model.object, model.owned_by) == ("sim-chat", "model", "simulator")
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("sim-gemini")
    with pytest.raises(openai.PermissionDeniedError) as caught:
        await client.chat.completions.create(model="sim-gemini", messages=_ask())
    assert caught.value.body["code"] == "model_not_allowed"

    everything = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0)
    assert len([m async for m in everything.models.list()]) == 5


async def test_upstream_refusing_our_key_fails_over_and_is_never_relayed(
        gateway_server: Any, make_config: Any, simulator: Any) -> None:
    """An upstream 401 is the operator's problem (a wrong upstream key): the next upstream serves the
    call, and when none can, the client gets 502, never the upstream's words about its key."""
    base = simulator.base_url
    handle, client, sink = await _start(
        gateway_server, make_config,
        [_upstream("ha-badkey", base, "sk-sim-fail401", 0), _upstream("ha-good", base, "sk-sim", 1)])
    await client.chat.completions.create(model="ha-chat", messages=_ask())
    await _flush(handle)
    assert (sink.logs[-1].upstream, sink.logs[-1].attempts) == ("ha-good", 2)

    bad_only = [_upstream("ha-badkey", base, "sk-sim-fail401")]
    # A second gateway on the same database: its caller needs a name of its own.
    _, bad_client, _ = await _start(gateway_server, make_config, bad_only, user_name="router-2")
    with pytest.raises(openai.APIStatusError) as caught:
        await bad_client.chat.completions.create(model="ha-chat", messages=_ask())
    assert caught.value.status_code == 502 and "sk-sim" not in str(caught.value.body)


async def test_a_stream_cut_before_its_first_chunk_fails_over(gateway_server: Any, make_config: Any,
                                                               simulator: Any) -> None:
    """Until a first chunk is read nothing reached the client: a stream that closes at once is a
    failed attempt (read by the one attempt path), not a cut stream."""
    base = simulator.base_url
    handle, client, sink = await _start(
        gateway_server, make_config,
        [{**_upstream("ha-cut", base, "sk-sim", 0), "models": {"ha-chat": "sim-chat-cut0"}},
         _upstream("ha-good", base, "sk-sim", 1)])
    stream = await client.chat.completions.create(model="ha-chat", messages=_ask(), stream=True)
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text.startswith("[simulated]")
    await _flush(handle, sink, 1)
    last = sink.logs[-1]
    assert (last.outcome, last.upstream, last.attempts) == ("success", "ha-good", 2)
