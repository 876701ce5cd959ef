"""What the cache serves and keeps, through the openai SDK: never another user's entry, nothing
past the TTL (the cache's clock moved, no sleep), ``Cache-Control: no-cache`` / ``no-store``,
nothing when off, never an error or a cut stream, and at most ``max_entries`` / ``max_bytes``
(oldest evicted first)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import openai
import pytest

from .conftest import cache, cache_config, kept, new_key, nonce, openai_client, query, upstream_calls

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway


async def _ask(
    client: openai.AsyncOpenAI, prompt: str, *, model: str = "c-chat", headers: dict[str, str] | None = None
) -> tuple[str | None, str]:
    raw = await client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": prompt}], extra_headers=headers or {}
    )
    return raw.headers.get("x-gateway-cache"), raw.parse().choices[0].message.content or ""


async def test_entries_are_never_shared_across_users(cache_gw: GatewayHandle, simulator: Any) -> None:
    _, key_a = await new_key(cache_gw)
    user_b, key_b = await new_key(cache_gw)
    _, key_b2 = await new_key(cache_gw)  # another user again: a second key of a user shares its entries
    other_key_of_b = (await cache_gw.create_key(user_b["id"], name="second"))["key"]
    prompt = nonce()
    a, b = openai_client(cache_gw, key_a), openai_client(cache_gw, key_b)
    assert (await _ask(a, prompt))[0] == "miss"
    await kept(cache_gw)
    assert (await _ask(b, prompt))[0] == "miss"  # same body, another user: the upstream again
    await kept(cache_gw)
    assert (await _ask(a, prompt))[0] == "hit"
    assert (await _ask(openai_client(cache_gw, other_key_of_b), prompt))[0] == "hit"  # B's own entry
    assert (await _ask(openai_client(cache_gw, key_b2), prompt))[0] == "miss"
    assert await upstream_calls(simulator.base_url, prompt) == 3


async def test_entries_expire_after_the_ttl(cache_gw: GatewayHandle, simulator: Any) -> None:
    _, key = await new_key(cache_gw)
    client, prompt = openai_client(cache_gw, key), nonce()
    assert (await _ask(client, prompt))[0] == "miss"
    await kept(cache_gw)
    cache(cache_gw).clock = lambda: time.time() + 59  # ttl_s is 60
    assert (await _ask(client, prompt))[0] == "hit"
    cache(cache_gw).clock = lambda: time.time() + 61
    assert (await _ask(client, prompt))[0] == "miss"  # expired: asked again, and kept afresh
    await kept(cache_gw)
    assert (await _ask(client, prompt))[0] == "hit"
    assert await upstream_calls(simulator.base_url, prompt) == 2


async def test_no_cache_asks_the_upstream_and_no_store_keeps_nothing(
    cache_gw: GatewayHandle, simulator: Any
) -> None:
    _, key = await new_key(cache_gw)
    client = openai_client(cache_gw, key)
    stored, fresh = nonce(), nonce()
    assert (await _ask(client, stored, headers={"Cache-Control": "no-store"}))[0] == "miss"
    await kept(cache_gw)
    assert (await _ask(client, stored))[0] == "miss"  # nothing was kept
    await kept(cache_gw)
    assert (await _ask(client, stored, headers={"Cache-Control": "no-store"}))[0] == "miss"  # nor read
    assert await upstream_calls(simulator.base_url, stored) == 3

    assert (await _ask(client, fresh))[0] == "miss"
    await kept(cache_gw)
    assert (await _ask(client, fresh, headers={"Cache-Control": "no-cache"}))[0] == "miss"
    await kept(cache_gw)
    assert (await _ask(client, fresh, headers={"cache-control": "max-age=0, No-Cache"}))[0] == "miss"
    assert (await _ask(client, fresh))[0] == "hit"
    assert await upstream_calls(simulator.base_url, fresh) == 3


async def test_off_by_default(gw: GatewayHandle, simulator: Any) -> None:
    client, prompt = openai_client(gw, gw.key), nonce()
    for _ in range(2):
        raw = await client.chat.completions.with_raw_response.create(
            model="sim-chat", messages=[{"role": "user", "content": prompt}]
        )
        assert "x-gateway-cache" not in raw.headers
    assert await upstream_calls(simulator.base_url, prompt) == 2


async def test_errors_and_cut_streams_are_never_kept(cache_gw: GatewayHandle, simulator: Any) -> None:
    _, key = await new_key(cache_gw)
    client = openai_client(cache_gw, key)
    failing, cut = nonce(), nonce()
    for _ in range(2):
        with pytest.raises(openai.APIStatusError) as refused:
            await _ask(client, failing, model="c-down")
        assert refused.value.status_code == 502
        await kept(cache_gw)
    assert await upstream_calls(simulator.base_url, failing) == 2

    for _ in range(2):  # the upstream cuts the stream after 3 chunks: an error event, never kept
        raw = await client.chat.completions.with_raw_response.create(
            model="c-cut", messages=[{"role": "user", "content": cut}], stream=True
        )
        assert raw.headers["x-gateway-cache"] == "miss"
        with pytest.raises(openai.APIError):
            _ = [chunk async for chunk in raw.parse()]
        await kept(cache_gw)
    assert await upstream_calls(simulator.base_url, cut) == 2
    assert query(cache_gw, "SELECT COUNT(*) AS n FROM response_cache")[0]["n"] == 0


async def test_bounded_by_entries_and_bytes_oldest_first(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await gateway_server(cache_config(make_config, simulator.base_url, max_entries=3))
    _, key = await new_key(gw)
    client = openai_client(gw, key)
    prompts = [nonce() for _ in range(5)]
    for i, prompt in enumerate(prompts):
        cache(gw).clock = lambda i=i: time.time() + i  # one second apart: an order to evict by
        assert (await _ask(client, prompt))[0] == "miss"
        await kept(gw)
        assert query(gw, "SELECT COUNT(*) AS n FROM response_cache")[0]["n"] == min(i + 1, 3)
    assert cache(gw).evicted == 2
    for prompt in prompts[2:]:
        assert (await _ask(client, prompt))[0] == "hit"
    for prompt in prompts[:2]:  # the oldest two went
        assert (await _ask(client, prompt))[0] == "miss"

    sized = await gateway_server(cache_config(make_config, simulator.base_url, max_bytes=2048))
    _, key = await new_key(sized)
    client = openai_client(sized, key)
    for prompt in [nonce() for _ in range(6)]:
        await _ask(client, prompt)
        await kept(sized)
        sizes = query(sized, "SELECT size_bytes FROM response_cache")
        assert sum(row["size_bytes"] for row in sizes) <= 2048 and sizes
    assert cache(sized).evicted > 0


async def test_an_answer_over_entry_bytes_is_served_not_kept(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any
) -> None:
    gw = await gateway_server(cache_config(make_config, simulator.base_url, entry_bytes=256))
    _, key = await new_key(gw)
    client, prompt = openai_client(gw, key), nonce()
    assert (await _ask(client, prompt))[0] == "miss"
    await kept(gw)
    assert (await _ask(client, prompt))[0] == "miss"
    assert cache(gw).skipped == 2 and cache(gw).kept == 0


async def test_a_request_for_logprobs_is_not_served_by_the_cache(
    cache_gw: GatewayHandle, simulator: Any
) -> None:
    """The kept answer is canonical, which holds no log-probabilities: such calls always go upstream."""
    _, key = await new_key(cache_gw)
    client, prompt = openai_client(cache_gw, key), nonce()
    for _ in range(2):
        raw = await client.chat.completions.with_raw_response.create(
            model="c-chat", messages=[{"role": "user", "content": prompt}], logprobs=True
        )
        assert "x-gateway-cache" not in raw.headers
        await kept(cache_gw)
    assert await upstream_calls(simulator.base_url, prompt) == 2
