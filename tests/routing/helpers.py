"""Helpers of the routing tests: SDK clients on a routing gateway, and the books read back (the
request log through ``/api/log/self``, the ledger and reservations straight from SQLite)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anthropic
import openai
from google import genai
from google.genai import types

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle

IN_CHEAP, OUT_CHEAP = 1_000, 2_000  # nano-USD per token of conftest.CHEAP
IN_DEAR, OUT_DEAR = 5_000, 10_000  # of conftest.DEAR


def openai_client(gw: GatewayHandle, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


def anthropic_client(gw: GatewayHandle, key: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=key, max_retries=0)


@asynccontextmanager
async def genai_client(gw: GatewayHandle, key: str) -> AsyncIterator[genai.Client]:
    client = genai.Client(
        api_key=key, http_options=types.HttpOptions(base_url=gw.base_url, api_version="v1beta")
    )
    try:
        yield client
    finally:
        await client.aio.aclose()


async def log_rows(gw: GatewayHandle, count: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """Every request-log row of the gateway's database, once at least ``count`` are written (a
    stream's is written after its client read the end)."""
    deadline = time.monotonic() + timeout_s
    while True:
        await gw.gateway.meter.flush()
        rows = query(gw, "SELECT * FROM request_logs ORDER BY created_at, id")
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(0.02)


def database_path(gw: GatewayHandle) -> Path:
    return Path(gw.gateway.config.database.removeprefix("sqlite:///"))


def query(gw: GatewayHandle, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Rows of the gateway's SQLite database, read on a connection of the test's own."""
    with sqlite3.connect(database_path(gw)) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(sql, params)]


def cost(row: dict[str, Any], in_nano: int, out_nano: int) -> int:
    return row["prompt_tokens"] * in_nano + row["completion_tokens"] * out_nano


async def books_balance(gw: GatewayHandle) -> None:
    """No hold left open, and the audit of balances against the ledger is clean."""
    await gw.gateway.meter.flush(return_leases=True)
    assert await gw.gateway.storage.open_reservations() == []
    assert await gw.gateway.storage.audit() == []
