"""Anthropic Messages side of the simulator, exercised with the official ``anthropic`` SDK."""

from __future__ import annotations

import uuid

import aiohttp
import anthropic
import pytest

pytestmark = pytest.mark.asyncio(loop_scope="session")

USER = [{"role": "user", "content": "Describe a lighthouse"}]
TOOL = {
    "name": "lookup",
    "description": "look something up",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "number"}}},
}


async def test_messages_plain_and_limits(claude: anthropic.AsyncAnthropic) -> None:
    m = await claude.messages.create(model="claude-sim", max_tokens=1000, messages=USER)
    assert m.type == "message" and m.role == "assistant" and m.stop_reason == "end_turn"
    assert m.content[0].type == "text" and m.content[0].text.startswith("[simulated] ")
    assert 20 <= m.usage.output_tokens <= 60
    assert m.usage.cache_creation_input_tokens == 0 and m.usage.cache_read_input_tokens == 0
    again = await claude.messages.create(model="claude-sim", max_tokens=1000, messages=USER)
    assert again.content[0].text == m.content[0].text
    short = await claude.messages.create(model="claude-sim", max_tokens=3, messages=USER)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 3
    stopped = await claude.messages.create(
        model="claude-sim",
        max_tokens=100,
        messages=[{"role": "user", "content": "one two three sim:echo"}],
        stop_sequences=["two"],
    )
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "two"
    assert stopped.content[0].text == "[simulated] one "


async def test_messages_stream_event_order(claude: anthropic.AsyncAnthropic) -> None:
    msgs = [{"role": "user", "content": "stream please sim:tokens=5"}]
    async with claude.messages.stream(model="claude-sim", max_tokens=100, messages=msgs) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_message()
    raw = [k for k in kinds if k not in ("text",)]
    assert raw[0] == "message_start" and raw[-1] == "message_stop" and raw[-2] == "message_delta"
    assert raw[1:3] == ["content_block_start", "content_block_delta"]
    assert final.content[0].text.startswith("[simulated]") and final.usage.output_tokens == 5
    assert final.stop_reason == "end_turn"


async def test_messages_raw_stream_has_ping(http: aiohttp.ClientSession, base_url: str) -> None:
    headers = {"x-api-key": "sk-sim", "anthropic-version": "2023-06-01"}
    body = {"model": "claude-sim", "max_tokens": 10, "stream": True, "messages": USER}
    async with http.post(f"{base_url}/v1/messages", json=body, headers=headers) as resp:
        text = await resp.text()
    events = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("event: ")]
    assert events[:3] == ["message_start", "ping", "content_block_start"]
    assert events[-3:] == ["content_block_stop", "message_delta", "message_stop"]


async def test_messages_tools(claude: anthropic.AsyncAnthropic) -> None:
    m = await claude.messages.create(model="claude-sim", max_tokens=200, messages=USER, tools=[TOOL])
    assert m.stop_reason == "tool_use"
    use = m.content[-1]
    assert use.type == "tool_use" and use.id.startswith("toolu_") and use.input == {"q": "sim", "n": 1}
    follow = [
        *USER,
        {"role": "assistant", "content": [use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "found 42"}]},
    ]
    r = await claude.messages.create(model="claude-sim", max_tokens=200, messages=follow, tools=[TOOL])
    assert r.stop_reason == "end_turn" and "tool said: found 42" in r.content[0].text
    async with claude.messages.stream(
        model="claude-sim", max_tokens=200, messages=USER, tools=[TOOL]
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[-1].input == use.input and final.stop_reason == "tool_use"
    no = await claude.messages.create(
        model="claude-sim", max_tokens=200, messages=USER, tools=[TOOL], tool_choice={"type": "none"}
    )
    assert no.content[0].type == "text"


async def test_messages_thinking(claude: anthropic.AsyncAnthropic) -> None:
    kw = {"model": "claude-sim", "max_tokens": 2000, "messages": USER}
    m = await claude.messages.create(**kw, thinking={"type": "enabled", "budget_tokens": 1024})
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking.startswith("[simulated reasoning]") and m.content[0].signature
    async with claude.messages.stream(**kw, thinking={"type": "enabled", "budget_tokens": 1024}) as stream:
        deltas = [e.delta.type async for e in stream if e.type == "content_block_delta"]
        final = await stream.get_final_message()
    assert "thinking_delta" in deltas and "signature_delta" in deltas and "text_delta" in deltas
    assert final.content[0].thinking == m.content[0].thinking
    assert final.content[0].signature == m.content[0].signature
    effort = await claude.messages.create(**kw, extra_body={"effort": "high"})
    assert effort.content[0].type == "thinking"


async def test_prompt_caching(claude: anthropic.AsyncAnthropic) -> None:
    big = f"{uuid.uuid4()} " + "policy text " * 200
    system = [{"type": "text", "text": big, "cache_control": {"type": "ephemeral"}}]
    first = await claude.messages.create(model="claude-sim", max_tokens=50, system=system, messages=USER)
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    second = await claude.messages.create(
        model="claude-sim", max_tokens=50, system=system, messages=[{"role": "user", "content": "other q"}]
    )
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    counted = await claude.messages.count_tokens(model="claude-sim", system=system, messages=USER)
    u = first.usage
    assert counted.input_tokens == u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens


async def test_auth_and_version_errors(http: aiohttp.ClientSession, base_url: str) -> None:
    body = {"model": "claude-sim", "max_tokens": 10, "messages": USER}
    async with http.post(
        f"{base_url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}
    ) as r:
        assert r.status == 401
        err = await r.json()
    assert err["type"] == "error" and err["error"]["type"] == "authentication_error"
    async with http.post(f"{base_url}/v1/messages", json=body, headers={"x-api-key": "k"}) as r:
        assert r.status == 400 and (await r.json())["error"]["type"] == "invalid_request_error"
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    async with http.post(f"{base_url}/v1/messages", data=b"{nope", headers=headers) as r:
        assert r.status == 400
    async with http.post(
        f"{base_url}/v1/messages", json={"model": "claude-sim", "messages": USER}, headers=headers
    ) as r:
        assert r.status == 400 and "max_tokens" in (await r.json())["error"]["message"]


async def test_models_listing(claude: anthropic.AsyncAnthropic) -> None:
    ids = [m.id async for m in claude.models.list()]
    assert "claude-sim" in ids
    assert (await claude.models.retrieve("claude-sim")).display_name.endswith("(simulated)")


async def test_overloaded_failure_via_key(base_url: str) -> None:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-ant-fail529", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as exc:
        await client.messages.create(model="claude-sim", max_tokens=10, messages=USER)
    await client.close()
    assert exc.value.status_code == 529
    assert exc.value.body["error"] == {"type": "overloaded_error", "message": "simulated failure"}
