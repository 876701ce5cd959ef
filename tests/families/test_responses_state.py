"""Stored responses through the openai SDK: retrieve, delete, input items, ownership, restart and
replicas (SQLite and PostgreSQL), and usage details reaching the bill."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import openai
import pytest

from gateway.accounts.records import RequestLog
from gateway.hooks.specs import hookimpl
from gateway.storage.testing import database_url, pg_database
from tests.conftest import GatewayHandle, MakeConfig, SimulatorHandle, StartGateway
from tests.families.responses_helpers import (
    WEATHER,
    rclient,
    responses_config,
    rgw,
    sdk_client,
    upstream_bodies,
)

__all__ = ["database_url", "pg_database", "rclient", "rgw"]  # fixtures


async def test_retrieve_delete_input_items(rgw: GatewayHandle, rclient: openai.AsyncOpenAI) -> None:
    first = await rclient.responses.create(
        model="sim-claude", input="one", instructions="Be brief.", metadata={"topic": "test"}
    )
    second = await rclient.responses.create(model="sim-claude", input="two", previous_response_id=first.id)
    got = await rclient.responses.retrieve(second.id)
    assert got.id == second.id and got.output_text == second.output_text
    assert got.previous_response_id == first.id and got.usage is not None
    assert (await rclient.responses.retrieve(first.id)).metadata == {"topic": "test"}

    items = await rclient.responses.input_items.list(second.id, order="asc")
    texts = [_text(item) for item in items.data]
    assert texts == ["one", first.output_text, "two"]  # the whole conversation the model saw
    assert all(item.id for item in items.data)
    newest = await rclient.responses.input_items.list(second.id, limit=1)
    assert [_text(i) for i in newest.data] == ["two"] and newest.has_more
    after = await rclient.responses.input_items.list(second.id, limit=5, after=newest.data[0].id)
    assert [_text(i) for i in after.data] == [first.output_text, "one"]

    deleted = await rclient.responses.delete(second.id)
    assert deleted is None  # the SDK returns nothing; the body said deleted
    with pytest.raises(openai.NotFoundError):
        await rclient.responses.retrieve(second.id)
    with pytest.raises(openai.NotFoundError):
        await rclient.responses.delete(second.id)
    with pytest.raises(openai.BadRequestError) as err:
        await rclient.responses.create(model="sim-claude", input="three", previous_response_id=second.id)
    assert err.value.param == "previous_response_id"
    raw = await rgw.request("DELETE", f"/v1/responses/{first.id}", key=rgw.key)
    assert raw.status == 200 and raw.json() == {"id": first.id, "object": "response", "deleted": True}


def _text(item: Any) -> str:
    content = item.content
    return content if isinstance(content, str) else "".join(part.text for part in content)


async def test_another_users_response(
    rgw: GatewayHandle, rclient: openai.AsyncOpenAI, simulator: SimulatorHandle
) -> None:
    mine = await rclient.responses.create(model="sim-chat", input="private")
    other_user = await rgw.create_user("other" + secrets.token_hex(3))
    other_key = (await rgw.create_key(other_user["id"]))["key"]
    other = openai.AsyncOpenAI(base_url=rgw.base_url + "/v1", api_key=other_key, max_retries=0)
    try:
        with pytest.raises(openai.NotFoundError):
            await other.responses.retrieve(mine.id)
        with pytest.raises(openai.NotFoundError):
            await other.responses.input_items.list(mine.id)
        with pytest.raises(openai.NotFoundError):
            await other.responses.delete(mine.id)
        marker = "x" + secrets.token_hex(4)
        with pytest.raises(openai.BadRequestError) as err:
            await other.responses.create(model="sim-chat", input=marker, previous_response_id=mine.id)
        assert err.value.param == "previous_response_id"
        assert await upstream_bodies(simulator, marker) == []  # refused before any upstream call
    finally:
        await other.close()
    assert (await rclient.responses.retrieve(mine.id)).id == mine.id  # still there for its owner


async def test_survives_restart_and_serves_replicas(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle, database_url: str
) -> None:
    config = responses_config(make_config, simulator, database=database_url)
    a, b = await gateway_server(config), await gateway_server(config)
    client_a = await sdk_client(a)
    client_b = openai.AsyncOpenAI(base_url=b.base_url + "/v1", api_key=a.key, max_retries=0)
    first = await client_a.responses.create(model="sim-gemini", input="Weather in Rome?", tools=[WEATHER])  # type: ignore[list-item]
    call = next(item for item in first.output if item.type == "function_call")
    second = await client_b.responses.create(  # the other replica, at once
        model="sim-gemini",
        previous_response_id=first.id,
        tools=[WEATHER],  # type: ignore[list-item]
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "rainy"}],
    )
    assert "rainy" in second.output_text
    await client_a.close()
    await client_b.close()
    await a.stop()
    await b.stop()
    c = await gateway_server(config)  # a restart: a new app on the same database
    client_c = openai.AsyncOpenAI(base_url=c.base_url + "/v1", api_key=a.key, max_retries=0)
    try:
        assert (await client_c.responses.retrieve(second.id)).output_text == second.output_text
        third = await client_c.responses.create(
            model="resp-native", input="and tomorrow?", previous_response_id=second.id
        )
        assert third.status == "completed"
        items = await client_c.responses.input_items.list(third.id, order="asc")
        assert [item.type for item in items.data] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message",
        ]
    finally:
        await client_c.close()


class LogSink:
    def __init__(self) -> None:
        self.logs: list[RequestLog] = []

    @hookimpl
    def gateway_request_finished(self, gateway: object, log: RequestLog) -> None:
        self.logs.append(log)

    async def last(self, n: int) -> list[RequestLog]:
        for _ in range(300):
            if len(self.logs) >= n:
                return self.logs[-n:]
            await asyncio.sleep(0.01)
        raise AssertionError("no request log")


@pytest.mark.parametrize("stream", [False, True])
async def test_usage_details_reach_the_bill(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle, stream: bool
) -> None:
    sink = LogSink()
    handle = await gateway_server(responses_config(make_config, simulator), extra_plugins=[sink])
    rclient = await sdk_client(handle)
    try:
        first = await rclient.responses.create(
            model="resp-native", input="think first", reasoning={"effort": "high"}
        )
        kwargs: dict[str, Any] = {
            "model": "resp-native",
            "input": "and again",
            "previous_response_id": first.id,
            "reasoning": {"effort": "high"},
        }
        if stream:
            events = [e async for e in await rclient.responses.create(stream=True, **kwargs)]
            second = events[-1].response
        else:
            second = await rclient.responses.create(**kwargs)
        assert second.usage.input_tokens_details.cached_tokens > 0
        assert second.usage.output_tokens_details.reasoning_tokens > 0
        assert any(item.type == "reasoning" for item in second.output)
        chat = (
            await rclient.responses.create(
                model="sim-chat", input="reason", reasoning={"effort": "low"}, stream=stream
            )
            if not stream
            else None
        )
        logs = await sink.last(3 if chat is not None else 2)
        log = logs[1]
        assert log.family == "responses" and log.is_stream == stream and log.outcome == "success"
        assert log.cache_read_tokens == second.usage.input_tokens_details.cached_tokens
        assert log.reasoning_tokens == second.usage.output_tokens_details.reasoning_tokens
        assert log.prompt_tokens == second.usage.input_tokens and log.charge_nano > 0
        if chat is not None:  # a chat upstream's reasoning tokens, translated
            assert chat.usage is not None and chat.usage.output_tokens_details.reasoning_tokens > 0
            assert logs[2].reasoning_tokens == chat.usage.output_tokens_details.reasoning_tokens
    finally:
        await rclient.close()


async def test_translated_stream_reasoning_is_billed(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle
) -> None:
    sink = LogSink()
    handle = await gateway_server(responses_config(make_config, simulator), extra_plugins=[sink])
    rclient = await sdk_client(handle)
    try:
        async with rclient.responses.stream(
            model="sim-chat", input="reason", reasoning={"effort": "low"}
        ) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_response()
        assert "response.reasoning_summary_text.delta" in kinds
        assert final.usage is not None and final.usage.output_tokens_details.reasoning_tokens > 0
        (log,) = await sink.last(1)
        assert log.is_stream and log.reasoning_tokens == final.usage.output_tokens_details.reasoning_tokens
        assert log.completion_tokens == final.usage.output_tokens
    finally:
        await rclient.close()


@pytest.mark.parametrize("model", ["cut-native", "cut-chat"])
async def test_a_cut_stream_is_not_stored(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: SimulatorHandle, model: str
) -> None:
    sink = LogSink()
    config = make_config(
        extra_models=[
            {"id": m, "price": {"input_per_mtok": 1, "output_per_mtok": 1}}
            for m in ("cut-native", "cut-chat")
        ],
        extra_upstreams=[
            {
                "name": "cut-r",
                "protocol": "chat",
                "base_url": simulator.base_url,
                "api_key": "sk-sim",
                "models": {"cut-native": "gpt-sim-cut3"},
                "features": ["responses"],
            },
            {
                "name": "cut-c",
                "protocol": "chat",
                "base_url": simulator.base_url,
                "api_key": "sk-sim",
                "models": {"cut-chat": "gpt-sim-cut3"},
            },
        ],
    )
    handle = await gateway_server(config, extra_plugins=[sink])
    rclient = await sdk_client(handle)
    try:
        events = [
            e
            async for e in await rclient.responses.create(model=model, input="sim:tokens=30 go", stream=True)
        ]
        assert events[0].type == "response.created" and events[-1].type == "error"
        assert all(e.type != "response.completed" for e in events)
        with pytest.raises(openai.NotFoundError):
            await rclient.responses.retrieve(events[0].response.id)
        (log,) = await sink.last(1)
        assert log.outcome == "upstream_cut" and log.completion_tokens > 0  # what was generated is billed
    finally:
        await rclient.close()
