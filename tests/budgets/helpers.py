"""Shared pieces of the budget tests: the cost of one ``sim-flat`` call and how to make one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai

from tests.money.helpers import OUT_NANO

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle

MAX_TOKENS = 100
CALL_NANO = MAX_TOKENS * OUT_NANO  # worst case and actual cost of one call: 150,000 nano-USD
CALL_USD = CALL_NANO / 1e9


def flat_messages(marker: str) -> list[Any]:
    """A prompt that makes the simulator answer exactly ``MAX_TOKENS`` tokens."""
    return [{"role": "user", "content": f"sim:tokens={MAX_TOKENS} budget {marker}"}]


async def flat_call(client: openai.AsyncOpenAI, marker: str = "") -> Any:
    return await client.chat.completions.create(model="sim-flat", max_tokens=MAX_TOKENS,
                                                messages=flat_messages(marker))


def openai_client(gw: GatewayHandle, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


async def shown_key(gw: GatewayHandle, key_id: int) -> dict[str, Any]:
    reply = await gw.admin("GET", f"/admin/keys/{key_id}")
    assert reply.status == 200, reply.text
    return reply.json()


async def shown_user(gw: GatewayHandle, user_id: int) -> dict[str, Any]:
    reply = await gw.admin("GET", f"/admin/users/{user_id}")
    assert reply.status == 200, reply.text
    return reply.json()
