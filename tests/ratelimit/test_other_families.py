"""The rate limit on the other metered paths: a media task's submission (the task engine), audio
speech (a CallContext priced per character) and the Responses API: 429 in their envelope, nothing
held or sent upstream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai
import pytest

from tests.families.media_helpers import media_config, mgw

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

__all__ = ["media_config", "mgw"]  # fixtures


async def balance(gw: GatewayHandle, user_id: int) -> int:
    await gw.gateway.meter.flush()
    user = await gw.gateway.storage.get_user(user_id)
    assert user is not None
    return user.balance_nano


async def test_task_submission_is_limited_before_any_hold(mgw: GatewayHandle) -> None:
    user = await mgw.create_user(quota_usd=50)
    key = await mgw.create_key(user["id"], rpm=1)
    body = {"model": "videos-standard", "prompt": "a paper boat", "seconds": "4"}
    first = await mgw.request("POST", "/v1/videos", json=body, key=key["key"])
    assert first.status == 200, first.text
    assert first.headers["x-ratelimit-remaining-requests"] == "0"
    held = await balance(mgw, user["id"])
    refused = await mgw.request("POST", "/v1/videos", json=body, key=key["key"])
    assert refused.status == 429, refused.text
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert int(refused.headers["retry-after"]) >= 1
    assert await balance(mgw, user["id"]) == held  # no second hold
    _, total = await mgw.gateway.storage.user_tasks(user["id"], 1, 10)
    assert total == 1  # the refused one was never stored (nor sent)


async def test_speech_and_responses_are_limited(gateway_server: StartGateway, make_config: MakeConfig,
                                                simulator: Any) -> None:
    gw = await gateway_server(make_config(
        extra_models=[{"id": "tts-sim", "price": {"per_mchar": 15}}],
        extra_upstreams=[{"name": "sim-tts", "protocol": "chat", "base_url": simulator.base_url,
                          "api_key": "sk-sim", "models": ["tts-sim"]}]))
    user = await gw.create_user(quota_usd=10)
    key = await gw.create_key(user["id"], rpm=2)
    async with openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=key["key"], max_retries=0) as client:
        speech = await client.audio.speech.create(model="tts-sim", voice="alloy", input="hello")
        assert speech.response.headers["x-ratelimit-remaining-requests"] == "1"
        answer = await client.responses.create(model="sim-chat", input="hi", max_output_tokens=16)
        assert answer.status in ("completed", "incomplete")  # served (16 tokens may cut it short)
        before = await balance(gw, user["id"])
        with pytest.raises(openai.RateLimitError):
            await client.audio.speech.create(model="tts-sim", voice="alloy", input="hello")
        with pytest.raises(openai.RateLimitError):
            await client.responses.create(model="sim-chat", input="hi", max_output_tokens=16)
    assert await balance(gw, user["id"]) == before
