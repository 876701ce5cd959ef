"""The failover policy per upstream status, through HTTP with the openai SDK against a scripted
upstream whose answer is picked by the key it is sent: 401/403 fail over and are never asked again
within the call; 429 cools its upstream down for its Retry-After; 5xx and the like may be asked
again after a growing backoff."""

from __future__ import annotations

import collections
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import openai
import pytest
import pytest_asyncio
from aiohttp import web

from gateway.upstream.attempt import BACKOFF_FIRST_S, RETRY_AFTER_MAX_S, retry_after_s
from tests import loopback

MODEL = {"id": "fo-chat", "owned_by": "test", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}
ANSWER = {"id": "c1", "object": "chat.completion", "created": 1, "model": "fo-chat",
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": "ok"}}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


class Script:
    """Answers by the Bearer key: ``sk-ok``, ``sk-401``, ``sk-403``, ``sk-503``, ``sk-429-<seconds>``."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.times: list[tuple[str, float]] = []

    async def chat(self, request: web.Request) -> web.Response:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.calls[key] += 1
        self.times.append((key, time.monotonic()))
        await request.read()
        if key == "sk-ok":
            return web.json_response(ANSWER)
        if key.startswith("sk-429-"):
            return web.json_response({"error": {"message": "slow down"}}, status=429,
                                     headers={"Retry-After": key.removeprefix("sk-429-")})
        status = int(key.removeprefix("sk-"))
        return web.json_response({"error": {"message": f"status {status} for {key}"}}, status=status)


@pytest_asyncio.fixture
async def scripted() -> AsyncIterator[tuple[str, Script]]:
    script = Script()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", script.chat)
    async with loopback.serving(app, access_log=None) as base:
        yield base, script


def _upstream(name: str, base: str, key: str, priority: int) -> dict[str, Any]:
    return {"name": name, "protocol": "chat", "base_url": base, "api_key": key, "priority": priority,
            "models": {"fo-chat": "fo-chat"}}


async def _client(gateway_server: Any, make_config: Any, upstreams: list[dict[str, Any]],
                  **routing: Any) -> tuple[Any, openai.AsyncOpenAI]:
    config = make_config(extra_models=[MODEL], extra_upstreams=upstreams,
                         routing={"max_attempts": 3, "cooldown_s": 30, **routing})
    handle = await gateway_server(config)
    user = await handle.create_user("failover", quota_usd=10)
    key = (await handle.create_key(user["id"], name="fo"))["key"]
    return handle, openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0)


async def _ask(client: openai.AsyncOpenAI) -> str | None:
    reply = await client.chat.completions.create(model="fo-chat",
                                                 messages=[{"role": "user", "content": "hi"}])
    return reply.choices[0].message.content


@pytest.mark.parametrize("refusal", ["sk-401", "sk-403"])
async def test_a_refused_credential_fails_over_and_is_never_asked_again_in_the_call(
        gateway_server: Any, make_config: Any, scripted: tuple[str, Script], refusal: str) -> None:
    base, script = scripted
    # The second upstream fails too, so the third try must go back to it, never to the first.
    _, client = await _client(gateway_server, make_config,
                              [_upstream("refuses", base, refusal, 0), _upstream("down", base, "sk-503", 1)])
    with pytest.raises(openai.APIStatusError) as caught:
        await _ask(client)
    assert caught.value.status_code == 502 and "status" not in str(caught.value.body)  # never relayed
    assert script.calls[refusal] == 1 and script.calls["sk-503"] == 2


async def test_one_upstream_refusing_the_key_is_asked_once(gateway_server: Any, make_config: Any,
                                                            scripted: tuple[str, Script]) -> None:
    base, script = scripted
    _, client = await _client(gateway_server, make_config, [_upstream("refuses", base, "sk-401", 0)])
    with pytest.raises(openai.APIStatusError) as caught:
        await _ask(client)
    assert caught.value.status_code == 502 and script.calls["sk-401"] == 1


async def test_429_cools_its_upstream_down_for_its_retry_after(gateway_server: Any, make_config: Any,
                                                              scripted: tuple[str, Script]) -> None:
    base, script = scripted
    upstreams = [_upstream("busy", base, "sk-429-2", 0), _upstream("spare", base, "sk-ok", 1)]
    handle, client = await _client(gateway_server, make_config, upstreams)
    assert await _ask(client) == "ok"  # the spare answered at once
    assert script.calls["sk-429-2"] == 1
    until = handle.gateway.upstreams.cooling_until("busy")
    assert until is not None and 1.0 < until - time.time() <= 2.1  # Retry-After, not cooldown_s (30)
    assert await _ask(client) == "ok" and script.calls["sk-429-2"] == 1  # cooling: the spare first
    listed = await handle.admin("GET", "/admin/upstreams")
    states = {u["name"]: u["state"] for u in listed.json()["data"]}
    assert states["busy"] == "cooling_down"


async def test_5xx_is_asked_again_after_a_growing_backoff(gateway_server: Any, make_config: Any,
                                                          scripted: tuple[str, Script]) -> None:
    base, script = scripted
    _, client = await _client(gateway_server, make_config, [_upstream("down", base, "sk-503", 0)])
    with pytest.raises(openai.APIStatusError) as caught:
        await _ask(client)
    assert caught.value.status_code == 502 and script.calls["sk-503"] == 3
    gaps = [b - a for (_, a), (_, b) in zip(script.times, script.times[1:], strict=False)]
    assert gaps[0] >= BACKOFF_FIRST_S * 0.9 and gaps[1] >= 2 * BACKOFF_FIRST_S * 0.9, gaps


def test_retry_after_is_read_as_seconds_or_a_date() -> None:
    assert retry_after_s("7") == 7.0 and retry_after_s(" 1.5 ") == 1.5
    assert retry_after_s(None) is None and retry_after_s("soon") is None and retry_after_s("nan") is None
    assert retry_after_s("-3") == 0.0 and retry_after_s("99999999") == RETRY_AFTER_MAX_S
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    found = retry_after_s(later)
    assert found is not None and 28 <= found <= 30
