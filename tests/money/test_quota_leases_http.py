"""Quota leases through HTTP with the official SDK: calls answered in one piece hold from one lease
row per key and process; a stream holds a row of its own, named by its request id while it
streams; the admin API and the account views show the balance as the calls left it."""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from gateway.accounts.metering.audit import run_audit

from .helpers import Account, new_account

CALLS = 12


async def _open_rows(account: Account) -> list[str]:
    """Every open hold row of the account's key, slabs included (the gateway serves other tests'
    accounts too)."""
    rows = await account.gw.gateway.storage._fetch("SELECT request_id FROM reservations WHERE key_id = ?",
                                                   (account.key_record["id"],))
    return [r["request_id"] for r in rows]


async def _rows_while_in_flight(account: Account, calls: list[asyncio.Task[Any]]) -> list[str]:
    """The key's open rows, read as soon as there are any, while no call has been answered."""
    while True:
        rows = await _open_rows(account)
        assert not any(call.done() for call in calls), "a call was answered before a hold was seen"
        if rows:
            return rows
        await asyncio.sleep(0.005)


async def test_calls_in_one_piece_share_a_lease_streams_hold_their_own(fault_gw: Any) -> None:
    account = await new_account(fault_gw)
    instance = fault_gw.gateway.instance_id
    async with openai.AsyncOpenAI(base_url=fault_gw.base_url + "/v1", api_key=account.key,
                                  max_retries=0) as client:
        # sim-flat answers after 100 ms, so these calls are all in flight together.
        calls = [asyncio.create_task(client.chat.completions.with_raw_response.create(
            model="sim-flat", max_tokens=20, messages=[{"role": "user", "content": f"sim:tokens=5 n{i}"}]))
            for i in range(CALLS)]
        # Their holds are in the lease's row as soon as the first of them is in (on a loaded
        # machine that may take longer than a fixed wait; the answers come 100 ms later).
        rows = await _rows_while_in_flight(account, calls)
        assert rows == [f"lease:{instance}:{account.key_record['id']}"]
        answers = [(await call).parse() for call in calls]
        assert len(answers) == CALLS
        # The admin API reads balances after the lease gave back what it holds unused.
        reply = await fault_gw.admin("GET", f"/admin/users/{account.user['id']}")
        assert reply.status == 200, reply.text
        user = await fault_gw.gateway.storage.get_user(account.user["id"])
        assert user is not None and user.used_nano > 0
        assert round(reply.json()["quota_usd"] * 10**9) == user.balance_nano == 100 * 10**9 - user.used_nano
        assert await _open_rows(account) == []

        # sim-slow streams a token every 50 ms: its hold, carved from the slab, is moved into a row
        # of its own before the first byte.
        stream = await client.chat.completions.with_raw_response.create(
            model="sim-slow", max_tokens=20, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "sim:tokens=6 a stream"}])
        stream_id = stream.headers["X-Service-Request-Id"]
        chunks = stream.parse()
        first = await chunks.__anext__()
        assert first.id
        assert stream_id in await _open_rows(account)
        async for _ in chunks:
            pass

    await account.log_of(stream_id)
    storage = fault_gw.gateway.storage
    user = await storage.get_user(account.user["id"])
    key = await storage.get_key(account.key_record["id"])
    assert user is not None and key is not None
    assert user.balance_nano == 100 * 10**9 - user.used_nano
    assert user.used_nano == key.spent_nano > 0 and key.reserved_nano == 0
    assert user.request_count == CALLS + 1
    assert await _open_rows(account) == []
    assert await run_audit(storage) == []
