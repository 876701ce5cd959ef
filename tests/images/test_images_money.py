"""The Images API's money under load: 50 calls at once under a key ceiling, then under a daily
budget, never spend past it (each call holds ``per_image`` times ``n`` before its upstream is asked,
and settles on the images that came back); the key's spending equals the request log's sum, no
hold is left and the audit is clean."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson
import pytest

from .conftest import PER_IMAGE_NANO, START_NANO, Images, images_config, start

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import MakeConfig, StartGateway

CALLS = 50
LIMIT_USD = 1.0  # room for 12 calls held at n=2 ($0.08 each)


async def fire(base_urls: list[str], key: str) -> list[tuple[int, str, int]]:
    """CALLS generations at once, n=2, every other one answered with a single image; each call's
    status, error code and images returned."""
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    async def one(session: aiohttp.ClientSession, i: int) -> tuple[int, str, int]:
        prompt = f"{'[[images:1]] ' if i % 2 else ''}call {i}"
        body = {"model": "img-sim", "prompt": prompt, "n": 2, "response_format": "b64_json"}
        async with session.post(
            base_urls[i % len(base_urls)] + "/v1/images/generations", data=orjson.dumps(body), headers=headers
        ) as resp:
            answer = orjson.loads(await resp.read())
            if resp.status == 200:
                return 200, "", len(answer["data"])
            return resp.status, answer["error"]["code"], 0

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session, asyncio.timeout(90):
        return await asyncio.gather(*(one(session, i) for i in range(CALLS)))


def check_books(ended: list[tuple[int, str, int]], logs: list[dict[str, Any]], refusal: str) -> int:
    """The invariants of one burst; what was spent."""
    codes = Counter((status, code) for status, code, _ in ended)
    assert set(codes) <= {(200, ""), *((s, refusal) for s in (403, 429))}, codes
    assert codes[(200, "")] >= 1, codes
    served = [row for row in logs if row["status"] == 200]
    assert len(served) == codes[(200, "")]
    assert sorted(row["charge_nano"] for row in served) == sorted(
        images * PER_IMAGE_NANO for status, _, images in ended if status == 200
    )
    assert all(row["charge_nano"] == 0 for row in logs if row["status"] != 200)
    spent: int = sum(row["charge_nano"] for row in logs)
    assert spent <= int(LIMIT_USD * 1e9)
    return spent


@pytest.mark.parametrize(
    ("key_fields", "refusal"),
    [
        ({"quota_usd": LIMIT_USD}, "insufficient_quota"),
        ({"budget_usd": LIMIT_USD, "budget_period": "day"}, "budget_exceeded"),
    ],
)
async def test_fifty_at_once_never_pass_the_key_limit(
    gateway_server: StartGateway,
    make_config: MakeConfig,
    simulator: Any,
    key_fields: dict[str, Any],
    refusal: str,
) -> None:
    gw = await gateway_server(images_config(make_config, simulator.base_url))
    images: Images = await start(gw, simulator.base_url, **key_fields)
    ended = await fire([gw.base_url], images.key)
    spent = check_books(ended, await images.logs(), refusal)
    stored = await gw.gateway.storage.get_key(images.key_id)
    assert stored is not None and stored.spent_nano == spent
    assert await images.balance() == START_NANO - spent
    await images.books_balance()
