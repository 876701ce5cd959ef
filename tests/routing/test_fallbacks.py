"""Fallbacks across models (issue 36 point 1) through each family's official SDK: a model whose
every upstream fails (``primary-*``) is served by its first fallback the key may use
(``backup-*``; ``locked-*`` comes first but the key may not use it), whole and streamed, named in
the answer and in ``X-Gateway-Fallback``, charged at the fallback's prices; a model whose upstream
refuses the input as too long for its context (``tight-*``) falls back the same way."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import openai
import pytest

from .conftest import PROTOCOLS, Acct, new_acct
from .helpers import (
    IN_DEAR,
    OUT_DEAR,
    anthropic_client,
    books_balance,
    cost,
    genai_client,
    log_rows,
    openai_client,
    query,
)

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle

# google-genai subclasses aiohttp's ClientSession, which aiohttp warns about.
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")

ASK = [{"role": "user", "content": "hello sim:tokens=8"}]
LONG = "many words " * 60 + "sim:tokens=8"  # over the 40-token window of tight-*


def _served_by_backup(rows: list[dict[str, Any]], protocol: str) -> None:
    """Every row: served by backup-P, its name in the log, charged what the upstream reported at
    backup-P's prices (5 and 10 USD per million tokens, not primary-P's 1 and 2)."""
    for row in rows:
        assert (row["model"], row["status"], row["upstream"]) == (f"backup-{protocol}", 200, f"up-{protocol}")
        assert row["completion_tokens"] == 8 and row["prompt_tokens"] > 0
        assert row["charge_nano"] == cost(row, IN_DEAR, OUT_DEAR)


async def test_chat_sdk_falls_back_whole_and_streamed(routing_gw: GatewayHandle, acct: Acct) -> None:
    client = openai_client(routing_gw, acct.key)
    raw = await client.chat.completions.with_raw_response.create(model="primary-chat", messages=ASK)
    assert raw.headers["x-gateway-fallback"] == "backup-chat"
    reply = raw.parse()
    assert reply.model == "backup-chat" and reply.choices[0].message.content

    raw_stream = await client.chat.completions.with_raw_response.create(
        model="primary-chat", messages=ASK, stream=True, stream_options={"include_usage": True}
    )
    assert raw_stream.headers["x-gateway-fallback"] == "backup-chat"
    chunks = [chunk async for chunk in raw_stream.parse()]
    assert {chunk.model for chunk in chunks} == {"backup-chat"}
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 8

    rows = await log_rows(routing_gw, 2)
    _served_by_backup(rows, "chat")
    assert [row["is_stream"] for row in rows] == [0, 1]
    await books_balance(routing_gw)


async def test_messages_sdk_falls_back_whole_and_streamed(routing_gw: GatewayHandle, acct: Acct) -> None:
    client = anthropic_client(routing_gw, acct.key)
    raw = await client.messages.with_raw_response.create(
        model="primary-messages", max_tokens=64, messages=ASK
    )
    assert raw.headers["x-gateway-fallback"] == "backup-messages"
    assert (await raw.parse()).model == "backup-messages"

    raw_stream = await client.messages.with_raw_response.create(
        model="primary-messages", max_tokens=64, messages=ASK, stream=True
    )
    assert raw_stream.headers["x-gateway-fallback"] == "backup-messages"
    events = [event async for event in await raw_stream.parse()]
    starts = [event for event in events if event.type == "message_start"]
    assert len(starts) == 1 and starts[0].message.model == "backup-messages"
    assert events[-1].type == "message_stop"

    _served_by_backup(await log_rows(routing_gw, 2), "messages")
    await books_balance(routing_gw)


async def test_genai_sdk_falls_back_whole_and_streamed(routing_gw: GatewayHandle, acct: Acct) -> None:
    async with genai_client(routing_gw, acct.key) as client:
        reply = await client.aio.models.generate_content(
            model="primary-v1beta", contents="hello sim:tokens=8"
        )
        assert reply.model_version == "backup-v1beta" and reply.text
        assert reply.sdk_http_response is not None and reply.sdk_http_response.headers is not None
        assert reply.sdk_http_response.headers.get("x-gateway-fallback") == "backup-v1beta"

        chunks = [
            c
            async for c in await client.aio.models.generate_content_stream(
                model="primary-v1beta", contents="hello sim:tokens=8"
            )
        ]
        assert chunks and {c.model_version for c in chunks} == {"backup-v1beta"}
        headers = chunks[0].sdk_http_response.headers if chunks[0].sdk_http_response else None
        assert headers is not None and headers.get("x-gateway-fallback") == "backup-v1beta"

    _served_by_backup(await log_rows(routing_gw, 2), "v1beta")
    await books_balance(routing_gw)


async def test_responses_sdk_falls_back_whole_and_streamed(routing_gw: GatewayHandle, acct: Acct) -> None:
    client = openai_client(routing_gw, acct.key)
    raw = await client.responses.with_raw_response.create(model="primary-chat", input="hello sim:tokens=8")
    assert raw.headers["x-gateway-fallback"] == "backup-chat"
    reply = raw.parse()
    assert reply.model == "backup-chat" and reply.output_text

    raw_stream = await client.responses.with_raw_response.create(
        model="primary-chat", input="hello sim:tokens=8", stream=True
    )
    assert raw_stream.headers["x-gateway-fallback"] == "backup-chat"
    events = [event async for event in raw_stream.parse()]
    assert events[0].type == "response.created" and events[0].response.model == "backup-chat"
    assert events[-1].type == "response.completed" and events[-1].response.model == "backup-chat"

    _served_by_backup(await log_rows(routing_gw, 2), "chat")
    await books_balance(routing_gw)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_context_too_long_falls_back(routing_gw: GatewayHandle, acct: Acct, protocol: str) -> None:
    """The upstream of tight-P speaks P and refuses over 40 tokens in P's own words (OpenAI's
    context_length_exceeded, Anthropic's "prompt is too long", Gemini's input token count): a
    short input is served by tight-P itself, a long one by its fallback, whole and streamed."""
    client = openai_client(routing_gw, acct.key)
    raw = await client.chat.completions.with_raw_response.create(model=f"tight-{protocol}", messages=ASK)
    assert "x-gateway-fallback" not in raw.headers
    assert raw.parse().model == f"tight-{protocol}"

    long = [{"role": "user", "content": LONG}]
    raw = await client.chat.completions.with_raw_response.create(model=f"tight-{protocol}", messages=long)
    assert raw.headers["x-gateway-fallback"] == f"backup-{protocol}"
    assert raw.parse().model == f"backup-{protocol}"
    raw_stream = await client.chat.completions.with_raw_response.create(
        model=f"tight-{protocol}", messages=long, stream=True
    )
    assert raw_stream.headers["x-gateway-fallback"] == f"backup-{protocol}"
    assert {chunk.model async for chunk in raw_stream.parse()} == {f"backup-{protocol}"}

    rows = await log_rows(routing_gw, 3)
    assert rows[0]["model"] == f"tight-{protocol}"
    _served_by_backup(rows[1:], protocol)
    await books_balance(routing_gw)


async def test_without_a_fallback_the_refusal_is_relayed(routing_gw: GatewayHandle) -> None:
    """A key that may use no fallback of tight-chat gets the upstream's own 400."""
    acct = await new_acct(routing_gw, models=["tight-chat"])
    client = openai_client(routing_gw, acct.key)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="tight-chat", messages=[{"role": "user", "content": LONG}])
    assert "maximum context length" in refused.value.message


async def test_a_fallback_the_key_may_not_use_is_skipped(routing_gw: GatewayHandle) -> None:
    # May use locked-chat (the first fallback): it serves.
    anything = await new_acct(routing_gw, models=None)
    raw = await openai_client(routing_gw, anything.key).chat.completions.with_raw_response.create(
        model="primary-chat", messages=ASK
    )
    assert raw.headers["x-gateway-fallback"] == "locked-chat"
    # May use no fallback at all: the primary's failure, logged under the model asked for.
    only = await new_acct(routing_gw, models=["primary-chat"])
    with pytest.raises(openai.APIStatusError) as failed:
        await openai_client(routing_gw, only.key).chat.completions.create(model="primary-chat", messages=ASK)
    assert failed.value.status_code == 502
    assert "x-gateway-fallback" not in failed.value.response.headers
    rows = await log_rows(routing_gw, 2)
    assert rows[0]["model"] == "locked-chat"
    assert (rows[1]["model"], rows[1]["status"], rows[1]["charge_nano"]) == ("primary-chat", 502, 0)
    await books_balance(routing_gw)


async def test_a_fallback_is_charged_at_its_prices_in_the_ledger(
    routing_gw: GatewayHandle, acct: Acct
) -> None:
    """primary-chat's worst case (1 and 2 USD per million) is held first; backup-chat's (5 and 10)
    is larger, so it is held before backup-chat is asked and the first hold is released. The
    ledger then holds one settlement of exactly the log's charge, the release of the first hold,
    and the balance went down by the charge alone."""
    before = await routing_gw.gateway.storage.get_user(acct.user["id"])
    assert before is not None
    client = openai_client(routing_gw, acct.key)
    raw = await client.chat.completions.with_raw_response.create(
        model="primary-chat", messages=ASK, max_tokens=100
    )
    request_id = raw.headers["x-service-request-id"]
    [row] = await log_rows(routing_gw, 1)
    assert row["request_id"] == request_id and row["charge_nano"] == cost(row, IN_DEAR, OUT_DEAR)
    await books_balance(routing_gw)
    ledger = query(
        routing_gw,
        "SELECT kind, request_id, charge_nano FROM ledger WHERE request_id IN (?, ?) ORDER BY id",
        (request_id, f"{request_id}~backup-chat"),
    )
    assert sorted((r["kind"], r["request_id"], r["charge_nano"]) for r in ledger) == sorted(
        [("release", request_id, 0), ("settle", f"{request_id}~backup-chat", row["charge_nano"])]
    )
    after = await routing_gw.gateway.storage.get_user(acct.user["id"])
    assert after is not None and before.balance_nano - after.balance_nano == row["charge_nano"]


async def test_a_fallback_the_balance_cannot_cover_is_skipped(routing_gw: GatewayHandle) -> None:
    """$0.005 covers primary-chat's worst case at max_tokens=1000 (about $0.002) but not
    backup-chat's (about $0.01): the fallback is skipped, nothing is charged, nothing goes negative."""
    poor = await new_acct(routing_gw, quota_usd=0.005)
    with pytest.raises(openai.APIStatusError) as failed:
        await openai_client(routing_gw, poor.key).chat.completions.create(
            model="primary-chat", messages=ASK, max_tokens=1000
        )
    assert failed.value.status_code == 502
    await books_balance(routing_gw)
    user = await routing_gw.gateway.storage.get_user(poor.user["id"])
    assert user is not None and user.balance_nano == 5_000_000


async def test_fifty_concurrent_fallbacks_settle_exactly(routing_gw: GatewayHandle, acct: Acct) -> None:
    client = openai_client(routing_gw, acct.key)

    async def one(i: int) -> str:
        if i % 2:
            stream = await client.chat.completions.create(model="primary-chat", messages=ASK, stream=True)
            return {chunk.model async for chunk in stream}.pop()
        return (await client.chat.completions.create(model="primary-chat", messages=ASK)).model

    async with asyncio.timeout(60):
        served = await asyncio.gather(*(one(i) for i in range(50)))
    assert set(served) == {"backup-chat"}
    rows = await log_rows(routing_gw, 50)
    assert len(rows) == 50
    _served_by_backup(rows, "chat")
    await books_balance(routing_gw)
    user = await routing_gw.gateway.storage.get_user(acct.user["id"])
    assert user is not None and user.balance_nano == 100_000_000_000 - sum(r["charge_nano"] for r in rows)


async def test_legacy_completions_fall_back(routing_gw: GatewayHandle, acct: Acct) -> None:
    client = openai_client(routing_gw, acct.key)
    raw = await client.completions.with_raw_response.create(model="primary-chat", prompt="hello sim:tokens=8")
    assert raw.headers["x-gateway-fallback"] == "backup-chat"
    assert raw.parse().model == "backup-chat"
    stream = await client.completions.create(model="primary-chat", prompt="hello sim:tokens=8", stream=True)
    assert {chunk.model async for chunk in stream} == {"backup-chat"}
    _served_by_backup(await log_rows(routing_gw, 2), "chat")
    await books_balance(routing_gw)
