"""Each family's official SDK: a call the cache misses, then the same call answered from the cache
(``X-Gateway-Cache: hit``, no upstream call), whole and streamed in the client's own family, in
either order (a streamed miss serves a whole hit and the other way round). The upstream speaks the
client's format (the relay's fast path) or another (translated)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from .conftest import (
    anthropic_client,
    books_balance,
    genai_client,
    kept,
    log_rows,
    new_key,
    nonce,
    openai_client,
    upstream_calls,
)

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle

# google-genai subclasses aiohttp's ClientSession, which aiohttp warns about.
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")


async def _chat(client: Any, model: str, prompt: str, stream: bool) -> tuple[str, str, int]:
    """(X-Gateway-Cache, the answer's text, its completion tokens) of one chat call."""
    ask = [{"role": "user", "content": prompt}]
    if not stream:
        raw = await client.chat.completions.with_raw_response.create(model=model, messages=ask)
        reply = raw.parse()
        assert reply.model == model
        return raw.headers["x-gateway-cache"], reply.choices[0].message.content, reply.usage.completion_tokens
    raw = await client.chat.completions.with_raw_response.create(
        model=model, messages=ask, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in raw.parse()]
    assert {chunk.model for chunk in chunks} == {model}
    assert chunks[-1].usage is not None
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        "stop"
    ]
    return raw.headers["x-gateway-cache"], text, chunks[-1].usage.completion_tokens


@pytest.mark.parametrize("model", ["c-chat", "c-messages"])  # same format; translated to messages
@pytest.mark.parametrize("first_streamed", [False, True])
async def test_chat_sdk_miss_then_hit(
    cache_gw: GatewayHandle, simulator: Any, model: str, first_streamed: bool
) -> None:
    user, key = await new_key(cache_gw)
    client = openai_client(cache_gw, key)
    prompt = nonce()
    header, text, tokens = await _chat(client, model, prompt, first_streamed)
    assert header == "miss" and text and tokens == 6
    await kept(cache_gw)
    for stream in (first_streamed, not first_streamed):
        assert await _chat(client, model, prompt, stream) == ("hit", text, 6)
    assert await upstream_calls(simulator.base_url, prompt) == 1
    rows = await log_rows(cache_gw, user["id"], 3)
    assert [(r["outcome"], r["upstream"]) for r in rows] == [
        ("success", f"cache-{model.removeprefix('c-')}"),
        ("cache_hit", None),
        ("cache_hit", None),
    ]
    assert [bool(r["is_stream"]) for r in rows] == [first_streamed, first_streamed, not first_streamed]
    assert all(r["completion_tokens"] == 6 for r in rows)
    await books_balance(cache_gw)


async def test_completions_sdk_miss_then_hit(cache_gw: GatewayHandle, simulator: Any) -> None:
    _, key = await new_key(cache_gw)
    client = openai_client(cache_gw, key)
    prompt = nonce()
    first = await client.completions.with_raw_response.create(model="c-chat", prompt=prompt, max_tokens=20)
    assert first.headers["x-gateway-cache"] == "miss"
    await kept(cache_gw)
    again = await client.completions.with_raw_response.create(model="c-chat", prompt=prompt, max_tokens=20)
    assert again.headers["x-gateway-cache"] == "hit"
    assert again.parse().choices[0].text == first.parse().choices[0].text
    assert await upstream_calls(simulator.base_url, prompt) == 1


@pytest.mark.parametrize("first_streamed", [False, True])
async def test_messages_sdk_miss_then_hit(
    cache_gw: GatewayHandle, simulator: Any, first_streamed: bool
) -> None:
    user, key = await new_key(cache_gw)
    client = anthropic_client(cache_gw, key)
    prompt = nonce()

    async def ask(stream: bool) -> tuple[str, str, int]:
        messages = [{"role": "user", "content": prompt}]
        raw = await client.messages.with_raw_response.create(
            model="c-messages", max_tokens=64, messages=messages, stream=stream
        )
        if not stream:
            reply = await raw.parse()
            assert reply.model == "c-messages" and reply.stop_reason == "end_turn"
            return raw.headers["x-gateway-cache"], reply.content[0].text, reply.usage.output_tokens
        events = [event async for event in await raw.parse()]
        assert events[0].type == "message_start" and events[-1].type == "message_stop"
        assert events[0].message.model == "c-messages"
        text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
        usage = [e.usage.output_tokens for e in events if e.type == "message_delta"]
        return raw.headers["x-gateway-cache"], text, usage[-1]

    header, text, tokens = await ask(first_streamed)
    assert header == "miss" and text and tokens == 6
    await kept(cache_gw)
    assert await ask(first_streamed) == ("hit", text, 6)
    assert await ask(not first_streamed) == ("hit", text, 6)
    assert await upstream_calls(simulator.base_url, prompt) == 1
    rows = await log_rows(cache_gw, user["id"], 3)
    assert [r["outcome"] for r in rows] == ["success", "cache_hit", "cache_hit"]
    await books_balance(cache_gw)


@pytest.mark.parametrize("first_streamed", [False, True])
async def test_genai_sdk_miss_then_hit(cache_gw: GatewayHandle, simulator: Any, first_streamed: bool) -> None:
    user, key = await new_key(cache_gw)
    prompt = nonce()
    async with genai_client(cache_gw, key) as client:

        async def ask(stream: bool) -> tuple[str | None, str, int | None]:
            if not stream:
                reply = await client.aio.models.generate_content(model="c-v1beta", contents=prompt)
                assert reply.model_version == "c-v1beta" and reply.sdk_http_response is not None
                headers = reply.sdk_http_response.headers or {}
                tokens = reply.usage_metadata.candidates_token_count if reply.usage_metadata else None
                return headers.get("x-gateway-cache"), reply.text or "", tokens
            chunks = [
                c
                async for c in await client.aio.models.generate_content_stream(
                    model="c-v1beta", contents=prompt
                )
            ]
            assert chunks and {c.model_version for c in chunks} == {"c-v1beta"}
            first = chunks[0].sdk_http_response
            headers = (first.headers if first is not None else None) or {}
            last = chunks[-1].usage_metadata
            return (
                headers.get("x-gateway-cache"),
                "".join(c.text or "" for c in chunks),
                last.candidates_token_count if last else None,
            )

        header, text, tokens = await ask(first_streamed)
        assert header == "miss" and text and tokens == 6
        await kept(cache_gw)
        assert await ask(first_streamed) == ("hit", text, 6)
        assert await ask(not first_streamed) == ("hit", text, 6)
    assert await upstream_calls(simulator.base_url, prompt) == 1
    rows = await log_rows(cache_gw, user["id"], 3)
    assert [r["outcome"] for r in rows] == ["success", "cache_hit", "cache_hit"]
    await books_balance(cache_gw)
