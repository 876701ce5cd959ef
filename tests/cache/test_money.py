"""What a hit is charged: ``hit_price_ratio`` of what the kept answer's usage costs at the model's
prices, held before and settled after (a ``settle`` ledger row and a ``cache_hit`` log row); a free
hit writes its log row and no ledger row; 50 hits at once on a balance that covers some of them
serve exactly those, refuse the rest, and leave the books balanced and nothing negative."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import openai
import pytest

from .conftest import (
    IN_NANO,
    OUT_NANO,
    books_balance,
    cache_config,
    kept,
    log_rows,
    new_key,
    nonce,
    openai_client,
    query,
    upstream_calls,
)

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway


def _cost(row: dict[str, Any]) -> int:
    return row["prompt_tokens"] * IN_NANO + row["completion_tokens"] * OUT_NANO


def _ledger(gw: GatewayHandle, request_id: str) -> list[dict[str, Any]]:
    return query(
        gw, "SELECT kind, charge_nano, delta_nano FROM ledger WHERE request_id = ? ORDER BY id", (request_id,)
    )


async def _miss_then_hits(gw: GatewayHandle, key: str, hits: int, stream: bool = False) -> str:
    client, prompt = openai_client(gw, key), nonce()
    ask = [{"role": "user", "content": prompt}]
    await client.chat.completions.create(model="c-chat", messages=ask)
    await kept(gw)
    for _ in range(hits):
        raw = await client.chat.completions.with_raw_response.create(
            model="c-chat", messages=ask, stream=stream
        )
        assert raw.headers["x-gateway-cache"] == "hit"
        if stream:
            _ = [chunk async for chunk in raw.parse()]
    return prompt


async def test_hits_are_charged_the_ratio_with_a_ledger_row(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await gateway_server(cache_config(make_config, simulator.base_url, hit_price_ratio=0.5))
    user, key = await new_key(gw)
    await _miss_then_hits(gw, key, 1)
    await _miss_then_hits(gw, key, 1, stream=True)
    rows = await log_rows(gw, user["id"], 4)
    assert [r["outcome"] for r in rows] == ["success", "cache_hit"] * 2
    for miss, hit in (rows[0:2], rows[2:4]):
        assert miss["charge_nano"] == _cost(miss) > 0
        assert (hit["prompt_tokens"], hit["completion_tokens"]) == (
            miss["prompt_tokens"],
            miss["completion_tokens"],
        )
        assert hit["charge_nano"] == _cost(miss) // 2 and hit["upstream"] is None
        settles = [r for r in _ledger(gw, hit["request_id"]) if r["kind"] == "settle"]
        assert [r["charge_nano"] for r in settles] == [_cost(miss) // 2]
    await books_balance(gw)
    spent = query(gw, "SELECT used_nano FROM users WHERE id = ?", (user["id"],))[0]["used_nano"]
    assert spent == sum(r["charge_nano"] for r in rows)


async def test_a_free_hit_writes_its_log_row_and_no_ledger_row(
    cache_gw: GatewayHandle, simulator: Any
) -> None:
    user, key = await new_key(cache_gw)
    prompt = await _miss_then_hits(cache_gw, key, 2)
    rows = await log_rows(cache_gw, user["id"], 3)
    assert [(r["outcome"], r["charge_nano"] > 0) for r in rows] == [
        ("success", True),
        ("cache_hit", False),
        ("cache_hit", False),
    ]
    for hit in rows[1:]:
        assert _ledger(cache_gw, hit["request_id"]) == []
    assert await upstream_calls(simulator.base_url, prompt) == 1
    await books_balance(cache_gw)


async def test_fifty_hits_at_once_never_overspend(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await gateway_server(cache_config(make_config, simulator.base_url, hit_price_ratio=1.0))
    user, key = await new_key(gw)
    prompt = await _miss_then_hits(gw, key, 0)
    hit_cost = _cost((await log_rows(gw, user["id"], 1))[0])
    # A second key of the same user (whose entry it is), with a ceiling of 20 and a half hits.
    ceiling = 20 * hit_cost + hit_cost // 2
    capped = (await gw.create_key(user["id"], name="capped", quota_usd=ceiling / 1e9))["key"]
    client = openai_client(gw, capped)
    ask = [{"role": "user", "content": prompt}]

    async def one() -> str:
        try:
            raw = await client.chat.completions.with_raw_response.create(model="c-chat", messages=ask)
        except openai.PermissionDeniedError as exc:
            assert exc.code == "insufficient_quota"
            return "refused"
        return raw.headers["x-gateway-cache"]

    answers = await asyncio.gather(*(one() for _ in range(50)))
    assert answers.count("hit") == 20 and answers.count("refused") == 30
    await books_balance(gw)
    spent = query(gw, "SELECT spent_nano, quota_nano FROM api_keys WHERE name = 'capped'")[0]
    assert spent["spent_nano"] == 20 * hit_cost and spent["quota_nano"] - spent["spent_nano"] == hit_cost // 2
    rows = await log_rows(gw, user["id"], 51)
    hits = [r for r in rows if r["outcome"] == "cache_hit"]
    assert len(hits) == 20 and {r["charge_nano"] for r in hits} == {hit_cost}
    assert await upstream_calls(simulator.base_url, prompt) == 1


async def test_a_hit_kept_from_a_fallback_is_charged_at_the_fallbacks_prices(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await gateway_server(cache_config(make_config, simulator.base_url, hit_price_ratio=1.0))
    user, key = await new_key(gw)
    client, prompt = openai_client(gw, key), nonce()
    ask = [{"role": "user", "content": prompt}]
    for expected in ("miss", "hit"):
        raw = await client.chat.completions.with_raw_response.create(model="c-primary", messages=ask)
        assert raw.headers["x-gateway-cache"] == expected
        assert raw.headers["x-gateway-fallback"] == "c-chat" and raw.parse().model == "c-chat"
        await kept(gw)
    miss, hit = await log_rows(gw, user["id"], 2)
    assert (miss["outcome"], hit["outcome"]) == ("success", "cache_hit")
    assert miss["model"] == hit["model"] == "c-chat"
    assert hit["charge_nano"] == miss["charge_nano"] == _cost(miss)  # c-chat's prices, not c-primary's
    await books_balance(gw)


async def test_hits_are_rate_limited_like_any_call(cache_gw: GatewayHandle, simulator: Any) -> None:
    _, key = await new_key(cache_gw, rpm=2)
    client, prompt = openai_client(cache_gw, key), nonce()
    ask = [{"role": "user", "content": prompt}]
    await client.chat.completions.create(model="c-chat", messages=ask)
    await kept(cache_gw)
    raw = await client.chat.completions.with_raw_response.create(model="c-chat", messages=ask)
    assert raw.headers["x-gateway-cache"] == "hit"
    with pytest.raises(openai.RateLimitError):
        await client.chat.completions.create(model="c-chat", messages=ask)
    assert await upstream_calls(simulator.base_url, prompt) == 1
