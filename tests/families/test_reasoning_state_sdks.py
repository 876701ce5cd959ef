"""Reasoning state and counts in every direction, end to end with the official SDKs (issue 37).

Each client family (chat completions through the openai SDK, the message protocol through the
anthropic SDK, v1beta through google-genai with its strict validation, the Responses API through
the openai SDK) runs a two-turn thinking-plus-tool conversation, plain and streamed, on a model of
each upstream protocol. The simulated upstreams sign their reasoning as their vendors do and refuse
a signature or redacted data they did not issue, so a second turn that succeeds proves the
upstream got its state back byte for byte; the test also reads what reached the upstream (the
simulator's request log) and compares it with what was issued. Usage figures add up as each
vendor's own API adds them.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest
import pytest_asyncio
from google import genai
from google.genai import types

from gateway.relay.reasoning_state import unseal
from gateway_simulator.textgen import signature_for
from translators.messages.simulator import REDACT_TRIGGER

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]

# model -> the protocol of its upstream (the default test config)
UPSTREAMS = {"sim-chat": "chat", "sim-claude": "messages", "sim-gemini": "v1beta"}
# On the message protocol the prompt also asks for redacted thinking (the vendor's test string).
PROMPT = {"sim-chat": "Weather in Oslo?", "sim-gemini": "Weather in Oslo?",
          "sim-claude": f"Weather in Oslo? {REDACT_TRIGGER}"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
UPSTREAM_PATHS = {"chat": "/chat/completions", "messages": "/v1/messages", "v1beta": "enerateContent"}


@pytest_asyncio.fixture
async def env(gw: Any, simulator: Any) -> AsyncIterator[Any]:
    gw.sim = simulator.base_url
    yield gw


async def upstream_request(handle: Any, protocol: str) -> dict[str, Any]:
    """The body of the last request the simulator received for ``protocol``."""
    async with handle.http.get(handle.sim + "/_sim/requests") as resp:
        entries = await resp.json()
    path = UPSTREAM_PATHS[protocol]
    return next(e["body_json_or_null"] for e in reversed(entries) if path in e["path"])


def b64(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        return value
    text = value.translate(str.maketrans("-_", "+/"))
    return base64.b64decode(text + "=" * (-len(text) % 4))


def issued(state: str) -> str:
    """What the upstream issued, from what a client of another family got (sealed) or its own."""
    sealed = unseal(state)
    return state if sealed is None else (sealed.data or sealed.signature or "")


async def check_upstream(handle: Any, model: str, thought: str, states: list[str]) -> None:
    """The second turn's upstream request holds the state issued in the first, byte for byte."""
    protocol = UPSTREAMS[model]
    body = await upstream_request(handle, protocol)
    if protocol == "messages":
        blocks = [b for m in body["messages"] if m["role"] == "assistant" for b in m["content"]]
        thinking = [b for b in blocks if b["type"] == "thinking"]
        assert [b["thinking"] for b in thinking] == [thought]
        assert thinking[0]["signature"] == signature_for(thought)
        redacted = [b["data"] for b in blocks if b["type"] == "redacted_thinking"]
        assert redacted and redacted == [s for s in states if s != thinking[0]["signature"]]
        assert thinking[0]["signature"] in states
    elif protocol == "v1beta":
        parts = [p for c in body["contents"] if c.get("role") == "model" for p in c["parts"]]
        sent = [b64(p["thoughtSignature"]) for p in parts if "thoughtSignature" in p]
        assert sent and sent == [b64(s) for s in states]
        assert any("functionCall" in p and "thoughtSignature" in p for p in parts)
    else:
        assert states == []  # a chat upstream issues no opaque state


# --- chat completions (openai SDK) ------------------------------------------------------------------

CHAT_TOOLS: list[Any] = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                                           "parameters": SCHEMA}}]


async def chat_turn(oa: openai.AsyncOpenAI, model: str, messages: list[Any],
                    streamed: bool) -> dict[str, Any]:
    """One answer as the assistant message to send back, plus its usage."""
    params: dict[str, Any] = {"model": model, "messages": messages, "tools": CHAT_TOOLS,
                              "reasoning_effort": "high", "max_completion_tokens": 4000}
    if not streamed:
        r = await oa.chat.completions.create(**params)
        m = r.choices[0].message
        extra = m.model_extra or {}
        calls = [c.model_dump() for c in m.tool_calls or []]
        return {"content": m.content, "calls": calls, "reasoning": extra.get("reasoning_content") or "",
                "details": extra.get("reasoning_details") or [], "usage": r.usage}
    out: dict[str, Any] = {"content": "", "calls": [], "reasoning": "", "details": [], "usage": None}
    stream = await oa.chat.completions.create(**params, stream=True, stream_options={"include_usage": True})
    async for chunk in stream:
        out["usage"] = chunk.usage or out["usage"]
        for choice in chunk.choices:
            d = choice.delta
            extra = d.model_extra or {}
            out["content"] += d.content or ""
            out["reasoning"] += extra.get("reasoning_content") or ""
            out["details"] += extra.get("reasoning_details") or []
            for tc in d.tool_calls or []:
                while len(out["calls"]) <= tc.index:
                    out["calls"].append({"id": "", "type": "function",
                                         "function": {"name": "", "arguments": ""}})
                call = out["calls"][tc.index]
                call["id"] = tc.id or call["id"]
                if tc.function is not None:
                    call["function"]["name"] += tc.function.name or ""
                    call["function"]["arguments"] += tc.function.arguments or ""
    return out


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("model", list(UPSTREAMS))
async def test_chat_client(env: Any, model: str, streamed: bool) -> None:
    oa = openai.AsyncOpenAI(base_url=env.base_url + "/v1", api_key=env.key, max_retries=0)
    messages: list[Any] = [{"role": "user", "content": PROMPT[model]}]
    first = await chat_turn(oa, model, messages, streamed)
    (call,) = first["calls"]
    assert call["function"]["name"] == "get_weather" and first["reasoning"]
    usage = first["usage"]
    assert 0 < usage.completion_tokens_details.reasoning_tokens < usage.completion_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    states = [d.get("signature") or d.get("data") for d in first["details"]]
    formats = {d["format"] for d in first["details"]}
    assert formats <= {"anthropic-claude-v1", "google-gemini-v1"}
    messages += [{"role": "assistant", "content": first["content"], "tool_calls": first["calls"],
                  "reasoning_content": first["reasoning"], "reasoning_details": first["details"]},
                 {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]
    second = await chat_turn(oa, model, messages, streamed)
    assert "sunny" in (second["content"] or "")
    signed = [d["text"] for d in first["details"] if d["type"] == "reasoning.text" and d["text"]]
    await check_upstream(env, model, signed[0] if signed else first["reasoning"], states)
    await oa.close()


# --- the message protocol (anthropic SDK) ---------------------------------------------------------------

@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("model", list(UPSTREAMS))
async def test_messages_client(env: Any, model: str, streamed: bool) -> None:
    ac = anthropic.AsyncAnthropic(base_url=env.base_url, api_key=env.key, max_retries=0)
    params: dict[str, Any] = {
        "model": model, "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "get_weather", "description": "weather", "input_schema": SCHEMA}]}
    messages: list[Any] = [{"role": "user", "content": PROMPT[model]}]

    async def turn() -> Any:
        if not streamed:
            return await ac.messages.create(**params, messages=messages)
        async with ac.messages.stream(**params, messages=messages) as stream:
            return await stream.get_final_message()

    first = await turn()
    (call,) = [b for b in first.content if b.type == "tool_use"]
    thinking = [b for b in first.content if b.type == "thinking"]
    assert thinking and first.content[0].type == "thinking"
    assert first.usage.output_tokens > 0
    states = [b.signature for b in thinking if b.signature]
    states += [b.data for b in first.content if b.type == "redacted_thinking"]
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [result]}]
    second = await turn()
    assert "sunny" in "".join(b.text for b in second.content if b.type == "text")
    thought = next((b.thinking for b in thinking if b.thinking), "")
    if UPSTREAMS[model] == "messages":
        await check_upstream(env, model, thought, states)
    else:  # another protocol's signature came sealed: the upstream gets what it issued, unsealed
        await check_upstream(env, model, thought, [issued(s) for s in states if s])
    await ac.close()


# --- v1beta (google-genai, which insists on valid base64 signatures) --------------------------------------

@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("model", list(UPSTREAMS))
async def test_v1beta_client(env: Any, model: str, streamed: bool) -> None:
    client = genai.Client(api_key=env.key,
                          http_options=types.HttpOptions(base_url=env.base_url, api_version="v1beta"))
    weather = types.FunctionDeclaration(name="get_weather", description="weather",
                                        parameters_json_schema=SCHEMA)
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[weather])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True),
        max_output_tokens=4000)
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text=PROMPT[model])])]

    async def turn() -> tuple[list[types.Part], Any]:
        if not streamed:
            r = await client.aio.models.generate_content(model=model, contents=contents, config=config)
            assert r.candidates and r.candidates[0].content
            return list(r.candidates[0].content.parts or []), r.usage_metadata
        parts: list[types.Part] = []
        usage = None
        async for c in await client.aio.models.generate_content_stream(model=model, contents=contents,
                                                                        config=config):
            parts += (c.candidates[0].content.parts or []) if c.candidates and c.candidates[0].content else []
            usage = c.usage_metadata or usage
        return parts, usage

    parts, usage = await turn()
    (call,) = [p.function_call for p in parts if p.function_call]
    thought = "".join(p.text or "" for p in parts if p.thought)
    assert call.name == "get_weather" and thought
    assert usage.thoughts_token_count and usage.thoughts_token_count > 0
    assert usage.total_token_count == (usage.prompt_token_count + usage.candidates_token_count
                                       + usage.thoughts_token_count)
    states = [base64.b64encode(p.thought_signature).decode() for p in parts if p.thought_signature]
    contents += [types.Content(role="model", parts=parts),
                 types.Content(role="user", parts=[types.Part.from_function_response(
                     name="get_weather", response={"result": "sunny"})])]
    second, _ = await turn()
    assert "sunny" in "".join(p.text or "" for p in second if not p.thought)
    await check_upstream(env, model, thought, [issued(s) for s in states])
    await client.aio.aclose()


# --- the Responses API (openai SDK): encrypted reasoning items --------------------------------------------

@pytest.mark.parametrize("model", ["sim-claude", "sim-gemini"])
async def test_responses_client(env: Any, model: str) -> None:
    oa = openai.AsyncOpenAI(base_url=env.base_url + "/v1", api_key=env.key, max_retries=0)
    params: dict[str, Any] = {
        "model": model, "reasoning": {"effort": "high"}, "include": ["reasoning.encrypted_content"],
        "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}], "store": False}
    ask: Any = {"role": "user", "content": PROMPT[model]}
    first = await oa.responses.create(**params, input=[ask])
    call = next(i for i in first.output if i.type == "function_call")
    reasoning = [i for i in first.output if i.type == "reasoning"]
    states = [i.encrypted_content for i in reasoning if i.encrypted_content]
    assert states and all(unseal(s) is not None for s in states)  # another protocol's state: sealed
    assert first.usage is not None and first.usage.output_tokens_details.reasoning_tokens > 0
    back = [i.model_dump(exclude_none=True) for i in first.output]
    second = await oa.responses.create(**params, stream=True, input=[
        ask, *back, {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    done = [event async for event in second][-1]
    assert done.type == "response.completed" and "sunny" in done.response.output_text
    thought = next(s.text for i in reasoning for s in i.summary if s.text)
    await check_upstream(env, model, thought, [issued(s) for s in states])
    await oa.close()


# --- a conversation that moves to a model of the client's own format ----------------------------------

async def test_moved_conversation_reaches_a_same_format_upstream(env: Any) -> None:
    """Sealed state in the history (from a model of another format) never reaches a same-format
    upstream as sealed bytes: the gateway translates that request, so each upstream gets only its own."""
    ac = anthropic.AsyncAnthropic(base_url=env.base_url, api_key=env.key, max_retries=0)
    params: dict[str, Any] = {
        "max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tools": [{"name": "get_weather", "description": "weather", "input_schema": SCHEMA}]}
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = await ac.messages.create(**params, model="sim-gemini", messages=messages)
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert any(b.type == "thinking" and unseal(b.signature) for b in first.content)
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "sunny"}
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [result]}]
    second = await ac.messages.create(**params, model="sim-claude", messages=messages)  # refused if sealed
    assert "sunny" in "".join(b.text for b in second.content if b.type == "text")
    sent = await upstream_request(env, "messages")
    assert "AGd3cnMx" not in str(sent)
    await ac.close()

    client = genai.Client(api_key=env.key,
                          http_options=types.HttpOptions(base_url=env.base_url, api_version="v1beta"))
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
            name="get_weather", description="weather", parameters_json_schema=SCHEMA)])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True))
    contents: list[types.Content] = [types.Content(role="user", parts=[types.Part(text="Weather in Oslo?")])]
    r = await client.aio.models.generate_content(model="sim-claude", contents=contents, config=config)
    assert r.candidates and r.candidates[0].content
    contents += [r.candidates[0].content, types.Content(role="user", parts=[
        types.Part.from_function_response(name="get_weather", response={"result": "sunny"})])]
    again = await client.aio.models.generate_content(model="sim-gemini", contents=contents, config=config)
    assert "sunny" in (again.text or "")
    assert "thoughtSignature" not in str(await upstream_request(env, "v1beta"))
    await client.aio.aclose()
