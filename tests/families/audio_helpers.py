"""Shared by the speech-to-text tests: a gateway with audio models on the simulator, an openai
client, and readers of the request log, the balance and what reached the upstream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
import openai

from gateway.accounts.records import RequestLog
from tests.translators.audio import audio_samples as samples

PER_SECOND_NANO = 100_000  # 0.006 USD per minute
START_NANO = 100 * 10**9
AUDIO_MODELS = [
    {"id": "whisper-sim", "owned_by": "simulator", "price": {"per_minute": 0.006}},
    {"id": "whisper-nousage", "owned_by": "simulator", "price": {"per_minute": 0.006}},
    {"id": "whisper-down", "owned_by": "simulator", "price": {"per_minute": 0.006}},
    {"id": "whisper-failover", "owned_by": "simulator", "price": {"per_minute": 0.006}},
    {"id": "whisper-rejects", "owned_by": "simulator", "price": {"per_minute": 0.006}},
]


@dataclass
class Audio:
    client: openai.AsyncOpenAI
    gw: Any  # GatewayHandle
    sim_url: str
    user_id: int
    key: str

    async def logs(self) -> list[RequestLog]:
        await self.gw.gateway.meter.flush()
        page = await self.gw.gateway.storage.log_page(self.user_id, 1, 100)
        return list(page.items)

    async def last_log(self) -> RequestLog:
        logs = await self.logs()
        assert logs, "no request log"
        return logs[0]

    async def balance(self) -> int:
        await self.gw.gateway.meter.flush()
        user = await self.gw.gateway.storage.get_user(self.user_id)
        assert user is not None
        return int(user.balance_nano)

    async def audio_calls_upstream(self) -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as http, http.get(self.sim_url + "/_sim/requests") as resp:
            entries: list[dict[str, Any]] = await resp.json()
        return [e for e in entries if e["path"].startswith("/v1/audio/")]

    async def clear_upstream_log(self) -> None:
        async with aiohttp.ClientSession() as http, http.delete(self.sim_url + "/_sim/requests"):
            pass


def audio_config(make_config: Any, sim_url: str, **overrides: Any) -> Any:
    upstreams = [
        {"name": "sim-audio", "protocol": "chat", "base_url": sim_url, "api_key": "sk-sim",
         "models": ["whisper-sim"]},
        {"name": "sim-audio-nousage", "protocol": "chat", "base_url": sim_url, "api_key": "sk-sim-nousage",
         "models": ["whisper-nousage"]},
        {"name": "sim-audio-down", "protocol": "chat", "base_url": sim_url, "api_key": "sk-sim-fail503",
         "models": ["whisper-down", "whisper-failover"]},
        {"name": "sim-audio-backup", "protocol": "chat", "base_url": sim_url, "api_key": "sk-sim",
         "models": ["whisper-failover"], "priority": 1},
        {"name": "sim-audio-picky", "protocol": "chat", "base_url": sim_url, "api_key": "sk-sim-fail422",
         "models": ["whisper-rejects"]},
    ]
    return make_config(extra_models=AUDIO_MODELS, extra_upstreams=upstreams, **overrides)


async def start(gateway_server: Any, make_config: Any, simulator: Any, quota_usd: float = 100,
                **overrides: Any) -> Audio:
    handle = await gateway_server(audio_config(make_config, simulator.base_url, **overrides))
    user = await handle.create_user("u", quota_usd=quota_usd)
    key = (await handle.create_key(user["id"], name="k"))["key"]
    client = openai.AsyncOpenAI(base_url=handle.base_url + "/v1", api_key=key, max_retries=0)
    return Audio(client, handle, simulator.base_url, user["id"], key)


WAV_3S = samples.wav(3.0)


def upload(data: bytes = WAV_3S, name: str = "speech.wav") -> tuple[str, bytes, str]:
    return name, data, "audio/wav"
