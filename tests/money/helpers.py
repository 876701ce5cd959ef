"""Helpers of the HTTP-level money tests: a config whose models each reach the simulator through an
upstream credential that picks one fault (``gateway_simulator.server``), and an account to call it
with and to read the request log back through ``/api/log/self``.

Prices: every model here costs 0.5 USD per million input tokens and 1.5 per million output tokens
(500 and 1,500 nano-USD per token), except ``sim-flat`` (input free), whose worst case is exactly
``max_tokens x 1,500`` nano-USD whatever the gateway's input estimate.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, Reply

IN_NANO = 500  # nano-USD per input token (0.5 USD per million)
OUT_NANO = 1_500  # nano-USD per output token (1.5 USD per million)
PRICE = {"input_per_mtok": 0.5, "output_per_mtok": 1.5}

# public model id -> upstream credential (the fault it picks in the simulator)
FAULT_MODELS: dict[str, str] = {
    "sim-fail": "sk-sim-fail503",  # every call answers 503
    "sim-cut": "sk-sim-cut3",  # streams end abruptly after 3 content chunks
    "sim-nousage": "sk-sim-nousage",  # no usage in any answer
    "sim-slow": "sk-sim-tok50",  # 50 ms between streamed tokens
    "sim-flat": "sk-sim-ttft100",  # first byte after 100 ms: calls overlap
}


def fault_config(make_config: MakeConfig, simulator_url: str, **overrides: Any) -> Any:
    models = [{"id": model_id, "owned_by": "simulator",
               "price": {"output_per_mtok": 1.5} if model_id == "sim-flat" else PRICE}
              for model_id in FAULT_MODELS]
    upstreams = [{"name": f"up-{model_id}", "protocol": "chat", "base_url": simulator_url,
                  "api_key": api_key, "models": [model_id]}
                 for model_id, api_key in FAULT_MODELS.items()]
    return make_config(extra_models=models, extra_upstreams=upstreams, **overrides)


@dataclass
class Account:
    """A user and one of its keys on a running gateway."""

    gw: GatewayHandle
    user: dict[str, Any]
    key_record: dict[str, Any]

    @property
    def key(self) -> str:
        return self.key_record["key"]

    @property
    def token(self) -> str:
        return self.user["user_token"]

    async def chat(self, model: str, prompt: str, **fields: Any) -> Reply:
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], **fields}
        return await self.gw.request("POST", "/v1/chat/completions", json=body, key=self.key)

    async def logs(self, page: int = 1, page_size: int = 100) -> dict[str, Any]:
        await self.gw.gateway.meter.flush()
        reply = await self.gw.request("GET", "/api/log/self", key=self.token,
                                      params={"page": str(page), "page_size": str(page_size)})
        assert reply.status == 200, reply.text
        return reply.json()["data"]

    async def log_of(self, request_id: str, timeout_s: float = 5.0) -> dict[str, Any]:
        """The request-log item of ``request_id`` (waits for a stream that is still ending)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for item in (await self.logs())["items"]:
                if item["request_id"] == request_id:
                    return item
            if time.monotonic() > deadline:
                raise AssertionError(f"no request log row for {request_id}")
            await asyncio.sleep(0.02)

    async def me(self) -> dict[str, Any]:
        await self.gw.gateway.meter.flush()
        reply = await self.gw.request("GET", "/api/user/self", key=self.token)
        assert reply.status == 200, reply.text
        return reply.json()["data"]


async def new_account(gw: GatewayHandle, balance_usd: float = 100, group: str = "default",
                      **key_fields: Any) -> Account:
    """A new user with ``balance_usd`` and one key made with ``key_fields`` (``quota_usd``...)."""
    user = await gw.create_user("money", quota_usd=balance_usd, group=group)
    key = await gw.create_key(user["id"], name="money-key", **key_fields)
    return Account(gw, user, key)
