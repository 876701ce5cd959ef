"""The terminal-state charging policy (docs/money.md), case by case through HTTP against the
simulator; outcomes are read back through ``/api/log/self`` with the user token."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from .helpers import IN_NANO, OUT_NANO, Account

RMB_PER_USD = 7.2
FULL_BALANCE_NANO = 100 * 10**9


def rmb(nano: int) -> float:
    return round(nano * RMB_PER_USD / 10**9, 6)


async def _balances(account: Account) -> tuple[int, int, int]:
    """(user balance, user used, key spent) after everything queued is committed."""
    storage = account.gw.gateway.storage
    await account.gw.gateway.meter.flush()
    user = await storage.get_user(account.user["id"])
    key = await storage.get_key(account.key_record["id"])
    assert user is not None and key is not None
    assert key.reserved_nano == 0
    return user.balance_nano, user.used_nano, key.spent_nano


def _sse_events(body: bytes) -> list[dict]:
    events = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            events.append(orjson.loads(line[6:]))
    return events


async def test_success_is_charged_its_usage(account: Account) -> None:
    reply = await account.chat("sim-chat", "sim:tokens=20 all good")
    assert reply.status == 200
    usage = reply.json()["usage"]
    item = await account.log_of(reply.headers["X-Service-Request-Id"])
    charge = usage["prompt_tokens"] * IN_NANO + 20 * OUT_NANO
    assert item["outcome"] == "success" and item["status"] == 200
    assert item["usage_estimated"] is False
    assert (item["prompt_tokens"], item["completion_tokens"]) == (usage["prompt_tokens"], 20)
    assert item["quota"] == rmb(charge)
    assert await _balances(account) == (FULL_BALANCE_NANO - charge, charge, charge)


@pytest.mark.parametrize(("model", "stream"), [
    ("sim-fail", False),  # 503 on every try
    ("sim-fail", True),  # 503 before the stream starts
    ("sim-cut", False),  # a truncated (non-stream) body: nothing reached the client
])
async def test_upstream_error_before_output_costs_nothing(account: Account, model: str, stream: bool) -> None:
    reply = await account.chat(model, "sim:tokens=20 doomed", stream=stream)
    assert reply.status == 502, reply.text
    assert reply.json()["error"]["code"] == "upstream_error"
    item = await account.log_of(reply.headers["X-Service-Request-Id"])
    assert item["outcome"] == "upstream_error" and item["status"] == 502
    assert item["quota"] == 0 and item["is_stream"] is stream
    assert item["upstream"] == f"up-{model}" and item["attempts"] >= 1
    assert await _balances(account) == (FULL_BALANCE_NANO, 0, 0)


async def test_upstream_cut_mid_stream_charges_what_was_generated(account: Account) -> None:
    reply = await account.chat("sim-cut", "sim:tokens=40 cut me short", stream=True,
                               stream_options={"include_usage": True})
    assert reply.status == 200  # the stream had started: the failure is reported inside it
    events = _sse_events(reply.body)
    text = "".join(choice["delta"].get("content") or ""
                   for event in events for choice in event.get("choices", []))
    assert 0 < len(text.split()) < 40
    assert any("error" in event for event in events), events[-1]
    item = await account.log_of(reply.headers["X-Service-Request-Id"])
    assert item["outcome"] == "upstream_cut"
    assert item["is_stream"] is True
    assert 0 < item["completion_tokens"] < 40
    balance, used, spent = await _balances(account)
    assert used == spent > 0 and balance == FULL_BALANCE_NANO - used
    assert item["quota"] == rmb(used)
    # What 40 tokens would have cost is more than what 3 chunks did.
    assert used < item["prompt_tokens"] * IN_NANO + 40 * OUT_NANO


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_without_usage_is_charged_an_offline_estimate(account: Account, stream: bool) -> None:
    fields = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    reply = await account.chat("sim-nousage", "sim:tokens=30 count it yourself", **fields)
    assert reply.status == 200, reply.text
    item = await account.log_of(reply.headers["X-Service-Request-Id"])
    assert item["outcome"] == "usage_estimated"
    assert item["usage_estimated"] is True
    assert item["prompt_tokens"] > 0 and item["completion_tokens"] > 0
    balance, used, spent = await _balances(account)
    assert used == spent > 0 and balance == FULL_BALANCE_NANO - used
    expected = item["prompt_tokens"] * IN_NANO + item["completion_tokens"] * OUT_NANO
    assert used == expected


async def test_client_disconnect_mid_stream_charges_what_was_generated(account: Account) -> None:
    body = {"model": "sim-slow", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "sim:tokens=200 take your time"}]}
    headers = {"Authorization": f"Bearer {account.key}"}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(account.gw.base_url + "/v1/chat/completions", json=body, headers=headers)
        assert resp.status == 200
        request_id = resp.headers["X-Service-Request-Id"]
        received = b""
        while received.count(b"data: ") < 4:
            chunk = await resp.content.readany()
            assert chunk, "the stream ended early"
            received += chunk
        resp.close()  # drop the connection mid-stream
    item = await account.log_of(request_id)
    assert item["outcome"] == "client_disconnect"
    assert item["is_stream"] is True
    assert 0 < item["completion_tokens"] < 200
    balance, used, spent = await _balances(account)
    full_answer = item["prompt_tokens"] * IN_NANO + 200 * OUT_NANO
    assert used == spent and 0 < used < full_answer
    assert balance == FULL_BALANCE_NANO - used
    assert item["quota"] == rmb(used)
    # The upstream call was stopped too: nothing more is charged later.
    await asyncio.sleep(0.2)
    assert await _balances(account) == (balance, used, spent)


async def test_refused_call_is_logged_and_never_reaches_an_upstream(account: Account) -> None:
    capped = await account.gw.create_key(account.user["id"], name="zero", quota_usd=0)
    reply = await account.gw.request(
        "POST", "/v1/chat/completions", key=capped["key"],
        json={"model": "sim-chat", "messages": [{"role": "user", "content": "sim:tokens=5 no money"}]})
    assert reply.status == 403
    assert reply.json()["error"]["code"] == "insufficient_quota"
    item = await account.log_of(reply.headers["X-Service-Request-Id"])
    assert item["status"] == 403 and item["quota"] == 0
    assert item["outcome"] == "client_error" and item["error_code"] == "insufficient_quota"
    assert item["upstream"] is None and item["attempts"] == 0
    assert await _balances(account) == (FULL_BALANCE_NANO, 0, 0)
