from __future__ import annotations

from tests.conftest import GatewayHandle
from tests.tasks.helpers import PRICE_NANO, balance_nano, submit, wait_task


async def test_imagine_succeeds_and_is_charged_once(tgw: GatewayHandle) -> None:
    before, _ = await balance_nano(tgw)
    reply = await submit(tgw, "imagine", {"prompt": "a red fox"})
    assert reply.status == 200, reply.text
    answer = reply.json()
    assert answer["code"] == 1 and answer["properties"] == {}
    task = await wait_task(tgw, answer["result"])
    assert task["status"] == "SUCCESS", task
    after, used = await balance_nano(tgw)
    assert before - after == PRICE_NANO and used == PRICE_NANO
    assert await tgw.gateway.storage.audit() == []
