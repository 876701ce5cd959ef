"""A served call is charged what its upstream reports, even above the reservation (docs/money.md).

The ``inflate`` models reach the simulator with the fault ``inflate40``: every token count it
reports is 40 times its own, far above any estimate the gateway can make (input and output:
``max_tokens`` is exceeded too). The excess over the reservation is taken from what the key's
ceiling and the user's balance still allow; what cannot be taken is recorded as uncharged (log row,
``uncharged`` ledger row, metric, ``gateway audit``), never dropped, and no balance goes negative.
Every call's log row is read back right after its answer, without waiting (read your writes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import msgspec
import openai
import pytest
import pytest_asyncio
from google import genai
from google.genai import types

from gateway.accounts.metering.audit import run_audit
from gateway.cli.main import main

from .helpers import IN_NANO, OUT_NANO, PRICE

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]  # google-genai

INFLATE = 40
INFLATED = {  # public model -> (protocol, upstream model)
    "inflate-chat": ("chat", "sim-chat"),
    "inflate-claude": ("messages", "sim-claude"),
    "inflate-gemini": ("v1beta", "sim-gemini"),
    "inflate-embed": ("chat", "sim-embed"),
}


def inflated_config(make_config: Any, simulator_url: str, **overrides: Any) -> Any:
    models = [{"id": m, "owned_by": "simulator", "price": PRICE} for m in INFLATED]
    upstreams = [{"name": f"up-{m}", "protocol": protocol, "base_url": simulator_url,
                  "api_key": f"sk-sim-inflate{INFLATE}", "models": {m: upstream_model}}
                 for m, (protocol, upstream_model) in INFLATED.items()]
    return make_config(extra_models=models, extra_upstreams=upstreams, **overrides)


@dataclass
class Env:
    gw: Any
    user: dict[str, Any]
    key: dict[str, Any]

    @property
    def secret(self) -> str:
        return str(self.key["key"])

    def openai(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.gw.base_url + "/v1", api_key=self.secret, max_retries=0)

    def anthropic(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(base_url=self.gw.base_url, api_key=self.secret, max_retries=0)

    def genai(self) -> genai.Client:
        return genai.Client(api_key=self.secret, http_options=types.HttpOptions(
            base_url=self.gw.base_url, api_version="v1beta"))

    async def stored(self) -> dict[str, Any]:
        user = await self.gw.gateway.storage.get_user(self.user["id"])
        key = await self.gw.gateway.storage.get_key(self.key["id"])
        return {"balance": user.balance_nano, "used": user.used_nano, "spent": key.spent_nano,
                "reserved": key.reserved_nano}

    async def log_items(self) -> list[dict[str, Any]]:
        """``/api/log/self`` at once: no flush, no wait (read your writes)."""
        reply = await self.gw.request("GET", "/api/log/self", key=self.user["user_token"])
        assert reply.status == 200, reply.text
        return list(reply.json()["data"]["items"])

    async def rows(self) -> list[Any]:
        """The stored log rows (exact nano-USD), once everything queued is committed."""
        await self.gw.gateway.meter.flush()
        return list((await self.gw.gateway.storage.log_page(self.user["id"], 1, 100)).items)


async def new_env(gw: Any, balance_usd: float = 100, **key_fields: Any) -> Env:
    user = await gw.create_user(quota_usd=balance_usd)
    return Env(gw, user, await gw.create_key(user["id"], **key_fields))


@pytest_asyncio.fixture
async def igw(gateway_server: Any, make_config: Any, simulator: Any) -> Any:
    return await gateway_server(inflated_config(make_config, simulator.base_url))


# --- one call per client and path, reported usage far above the estimate ------------------------------

async def _openai_chat(env: Env) -> tuple[int, int]:
    async with env.openai() as client:
        out = await client.chat.completions.create(
            model="inflate-chat", max_tokens=20,
            messages=[{"role": "user", "content": "sim:tokens=10 hello"}])
    assert out.usage is not None
    return out.usage.prompt_tokens, out.usage.completion_tokens


async def _openai_stream(env: Env) -> tuple[int, int]:
    async with env.openai() as client:
        stream = await client.chat.completions.create(
            model="inflate-chat", max_tokens=20, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "sim:tokens=10 你好 世界 🌍🌍"}])
        usage = None
        async for chunk in stream:
            usage = chunk.usage or usage
    assert usage is not None
    return usage.prompt_tokens, usage.completion_tokens


async def _anthropic_translated(env: Env) -> tuple[int, int]:
    async with env.anthropic() as client:  # message protocol client, chat upstream
        out = await client.messages.create(
            model="inflate-chat", max_tokens=20,
            messages=[{"role": "user", "content": "sim:tokens=10 def f(): pass"}])
    return out.usage.input_tokens, out.usage.output_tokens


async def _anthropic_fast(env: Env) -> tuple[int, int]:
    async with env.anthropic() as client:
        out = await client.messages.create(
            model="inflate-claude", max_tokens=20,
            messages=[{"role": "user", "content": "sim:tokens=10 aaaaaaaaaaaa"}])
    return out.usage.input_tokens, out.usage.output_tokens


async def _genai_fast(env: Env) -> tuple[int, int]:
    client = env.genai()
    try:
        out = await client.aio.models.generate_content(
            model="inflate-gemini", contents="sim:tokens=10 数字 1234567890",
            config=types.GenerateContentConfig(max_output_tokens=20))
    finally:
        await client.aio.aclose()
    assert out.usage_metadata is not None
    return out.usage_metadata.prompt_token_count or 0, out.usage_metadata.candidates_token_count or 0


async def _openai_embed(env: Env) -> tuple[int, int]:
    async with env.openai() as client:
        out = await client.embeddings.create(model="inflate-embed", input="漢字かな交じり文 " * 20)
    return out.usage.prompt_tokens, 0


CALLS = {"openai-chat": _openai_chat, "openai-stream": _openai_stream,
         "anthropic-translated": _anthropic_translated, "anthropic-fast": _anthropic_fast,
         "genai-fast": _genai_fast, "openai-embed": _openai_embed}


@pytest.mark.parametrize("call", list(CALLS))
async def test_reported_usage_is_charged_in_full(igw: Any, call: str) -> None:
    env = await new_env(igw)
    prompt, completion = await CALLS[call](env)
    assert prompt % INFLATE == 0 and completion % INFLATE == 0
    if call != "openai-embed":
        assert completion > 20  # beyond max_tokens: the reservation cannot have covered it
    cost = prompt * IN_NANO + completion * OUT_NANO
    items = await env.log_items()  # at once (read your writes)
    assert len(items) == 1 and items[0]["prompt_tokens"] == prompt
    assert items[0]["completion_tokens"] == completion
    [row] = await env.rows()
    assert (row.charge_nano, row.uncharged_nano, row.outcome) == (cost, 0, "success")
    stored = await env.stored()
    assert stored == {"balance": 100 * 10**9 - cost, "used": cost, "spent": cost, "reserved": 0}
    assert await run_audit(igw.gateway.storage) == []


# --- what the limits do not allow is recorded ---------------------------------------------------------

async def _metric(gw: Any, name: str) -> float:
    reply = await gw.request("GET", "/metrics")
    for line in reply.text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_key_ceiling_nearly_reached(igw: Any, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The call fits its reservation, but its actual cost does not fit the key: the key is charged
    up to its ceiling exactly, the rest is uncharged and listed; the user keeps the rest."""
    quota_nano = 200_000  # the worst case of the call below is about 70,000
    env = await new_env(igw, quota_usd=quota_nano / 1e9)
    calls_before = await _metric(igw, "gateway_uncharged_requests_total")
    prompt, completion = await _openai_chat(env)
    cost = prompt * IN_NANO + completion * OUT_NANO
    assert cost > quota_nano
    [item] = await env.log_items()
    assert item["quota"] > 0
    [row] = await env.rows()
    assert (row.charge_nano, row.uncharged_nano) == (quota_nano, cost - quota_nano)
    stored = await env.stored()
    assert stored == {"balance": 100 * 10**9 - quota_nano, "used": quota_nano, "spent": quota_nano,
                      "reserved": 0}
    assert [(e.request_id, e.uncharged_nano) for e in await igw.gateway.storage.uncharged_entries()] == [
        (row.request_id, cost - quota_nano)]
    assert await _metric(igw, "gateway_uncharged_requests_total") == calls_before + 1
    assert await run_audit(igw.gateway.storage) == []
    # The key is used up: the next call is refused before any upstream, and `gateway audit` lists
    # what was not charged (its books are still clean: exit 0).
    async with env.openai() as client:
        with pytest.raises(openai.PermissionDeniedError):
            await client.chat.completions.create(model="inflate-chat", max_tokens=5,
                                                 messages=[{"role": "user", "content": "hi"}])
    config = tmp_path / "gateway.yaml"
    config.write_bytes(msgspec.json.encode(igw.gateway.config))
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["audit", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "clean" in out and f"request {row.request_id}" in out and "uncharged: 1 call(s)" in out
    assert await asyncio.to_thread(main, ["audit", "--config", str(config), "--json"]) == 0
    report = msgspec.json.decode(capsys.readouterr().out)
    assert report["ok"] is True and report["uncharged"][0]["uncharged_nano"] == cost - quota_nano


async def test_user_balance_nearly_exhausted(igw: Any) -> None:
    """No key ceiling: the balance pays what it has and ends at exactly 0, never below."""
    balance_nano = 150_000
    env = await new_env(igw, balance_usd=balance_nano / 1e9)
    prompt, completion = await _anthropic_translated(env)
    cost = prompt * IN_NANO + completion * OUT_NANO
    assert cost > balance_nano
    [row] = await env.rows()
    assert (row.charge_nano, row.uncharged_nano) == (balance_nano, cost - balance_nano)
    assert await env.stored() == {"balance": 0, "used": balance_nano, "spent": balance_nano, "reserved": 0}
    assert await run_audit(igw.gateway.storage) == []


# --- concurrent calls on one key ----------------------------------------------------------------------

CONCURRENT = 30


async def _burst(env: Env) -> list[tuple[int, int] | BaseException]:
    start = asyncio.Event()

    async def one(i: int) -> tuple[int, int]:
        await start.wait()
        async with env.openai() as client:
            out = await client.chat.completions.create(
                model="inflate-chat", max_tokens=20,
                messages=[{"role": "user", "content": f"sim:tokens=10 call {i} 東京"}])
        assert out.usage is not None
        return out.usage.prompt_tokens, out.usage.completion_tokens

    tasks = [asyncio.create_task(one(i)) for i in range(CONCURRENT)]
    start.set()
    return await asyncio.gather(*tasks, return_exceptions=True)


async def _never_overspend(gw: Any, *, limit_on: str) -> None:
    limit_nano = 1_000_000  # about 14 worst cases, and 2 to 3 actual costs
    if limit_on == "key":
        env = await new_env(gw, quota_usd=limit_nano / 1e9)
    else:
        env = await new_env(gw, balance_usd=limit_nano / 1e9)
    results = await _burst(env)
    served = [r for r in results if isinstance(r, tuple)]
    refused = [r for r in results if not isinstance(r, tuple)]
    assert served and all(isinstance(r, openai.PermissionDeniedError) for r in refused), refused
    await gw.gateway.meter.flush()
    stored = await env.stored()
    rows = [r for r in await env.rows() if r.outcome == "success"]
    assert len(rows) == len(served)
    costs = sorted(p * IN_NANO + c * OUT_NANO for p, c in served)
    assert sorted(r.charge_nano + r.uncharged_nano for r in rows) == costs  # nothing lost
    charged = sum(r.charge_nano for r in rows)
    assert stored["spent"] == stored["used"] == charged <= limit_nano
    assert stored["reserved"] == 0 and stored["balance"] >= 0
    if limit_on == "user":
        assert stored["balance"] == limit_nano - charged
    assert sum(costs) > limit_nano  # the limit was what stopped it ...
    assert charged == limit_nano  # ... and it was used exactly, never exceeded
    assert await run_audit(gw.gateway.storage) == []


@pytest.mark.parametrize("limit_on", ["key", "user"])
async def test_concurrent_calls_never_overspend_sqlite(igw: Any, limit_on: str) -> None:
    await _never_overspend(igw, limit_on=limit_on)


@pytest_asyncio.fixture
async def pg_igw(gateway_server: Any, make_config: Any, simulator: Any,
                 fresh_pg_database: str) -> AsyncIterator[Any]:
    gw = await gateway_server(inflated_config(make_config, simulator.base_url, database=fresh_pg_database))
    yield gw
    await gw.stop()  # before the database is dropped


@pytest.mark.postgres
@pytest.mark.parametrize("limit_on", ["key", "user"])
async def test_concurrent_calls_never_overspend_postgres(pg_igw: Any, limit_on: str) -> None:
    await _never_overspend(pg_igw, limit_on=limit_on)


@pytest.mark.postgres
async def test_key_ceiling_on_postgres(pg_igw: Any) -> None:
    quota_nano = 200_000
    env = await new_env(pg_igw, quota_usd=quota_nano / 1e9)
    prompt, completion = await _genai_fast(env)
    cost = prompt * IN_NANO + completion * OUT_NANO
    [row] = await env.rows()
    assert (row.charge_nano, row.uncharged_nano) == (quota_nano, cost - quota_nano)
    assert await run_audit(pg_igw.gateway.storage) == []


# --- read your writes -------------------------------------------------------------------------------

async def test_every_view_shows_a_call_once_its_answer_is_read(igw: Any) -> None:
    """No flush, no wait: the log, the usage dashboard, the admin log and the balance show the
    call (stream: its settlement is queued before its last bytes go out)."""
    env = await new_env(igw)
    prompt, completion = await _openai_stream(env)
    cost = prompt * IN_NANO + completion * OUT_NANO
    [item] = await env.log_items()
    assert item["is_stream"] is True and item["completion_tokens"] == completion
    today = time.strftime("%Y-%m-%d", time.gmtime())
    tomorrow = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 86_400))
    reply = await igw.request("GET", "/v1/dashboard/billing/usage", key=env.secret,
                              params={"start_date": today, "end_date": tomorrow})
    assert reply.status == 200 and reply.json()["total_usage"] == pytest.approx(cost / 10**7)
    reply = await igw.admin("GET", f"/admin/logs?user_id={env.user['id']}")
    assert reply.status == 200 and [row["charge_nano"] for row in reply.json()["data"]] == [cost]
    reply = await igw.request("GET", "/api/user/self", key=env.user["user_token"])
    assert reply.json()["data"]["request_count"] == 1
    # and a second call, non-streamed, right after
    await _openai_chat(env)
    assert len(await env.log_items()) == 2
