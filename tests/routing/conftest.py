"""Fixtures of the routing tests (issue 36 points 1 and 2): a gateway whose models fall back across
upstreams of each protocol, and wildcard routes, all on the session simulator.

Fault options ride on the upstream credential or the upstream model id (``gateway_simulator.context``):
``sk-sim-fail503`` fails every call; the model id ``sim-window40`` refuses an input of more than 40
tokens with the protocol's own "too long for the context" error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest_asyncio

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

PROTOCOLS = ("chat", "messages", "v1beta")
CHEAP = {"input_per_mtok": 1, "output_per_mtok": 2}  # 1,000 / 2,000 nano-USD per token
DEAR = {"input_per_mtok": 5, "output_per_mtok": 10}  # 5,000 / 10,000 nano-USD per token
PATTERN_PRICE = {"input_per_mtok": 0.1, "output_per_mtok": 0.2}
SPECIAL_PRICE = {"input_per_mtok": 7, "output_per_mtok": 7}
DEEP_PRICE = {"input_per_mtok": 3, "output_per_mtok": 3}


def routing_models() -> list[dict[str, Any]]:
    models: list[dict[str, Any]] = []
    for p in PROTOCOLS:
        # primary-P: every upstream fails; its first fallback is one the test keys may not use.
        models.append({"id": f"primary-{p}", "price": CHEAP, "fallbacks": [f"locked-{p}", f"backup-{p}"]})
        models.append({"id": f"backup-{p}", "price": DEAR, "fallbacks": [f"primary-{p}"]})  # not followed
        models.append({"id": f"locked-{p}", "price": CHEAP})
        # tight-P: a context window of 40 tokens.
        models.append({"id": f"tight-{p}", "price": CHEAP, "fallbacks": [f"backup-{p}"]})
    models += [
        {"id": "vendor/*", "price": PATTERN_PRICE},
        {"id": "vendor/special", "price": SPECIAL_PRICE},
        {"id": "vendor/deep/*", "price": DEEP_PRICE},
        {"id": "sole/*", "price": PATTERN_PRICE},
    ]
    return models


def routing_upstreams(base_url: str) -> list[dict[str, Any]]:
    upstreams: list[dict[str, Any]] = []
    for p in PROTOCOLS:
        upstreams.append(
            {
                "name": f"down-{p}",
                "protocol": p,
                "base_url": base_url,
                "api_key": "sk-sim-fail503",
                "models": {f"primary-{p}": "sim-chat"},
            }
        )
        upstreams.append(
            {
                "name": f"up-{p}",
                "protocol": p,
                "base_url": base_url,
                "api_key": "sk-sim",
                "models": {
                    f"backup-{p}": "sim-chat",
                    f"locked-{p}": "sim-locked",
                    f"tight-{p}": "sim-window40",
                },
            }
        )
    upstreams += [
        {
            "name": "passthrough",
            "protocol": "chat",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": ["vendor/*"],
        },
        {
            "name": "deep",
            "protocol": "chat",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": {"vendor/deep/*": "sim-*"},
        },
        # A concrete id priced by a pattern entry, and listed.
        {
            "name": "sole",
            "protocol": "messages",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": {"sole/listed": "sim-listed"},
        },
    ]
    return upstreams


def routing_config(make_config: MakeConfig, base_url: str, **overrides: Any) -> Any:
    return make_config(
        extra_models=routing_models(),
        extra_upstreams=routing_upstreams(base_url),
        routing={"max_attempts": 2, "cooldown_s": 30.0},
        **overrides,
    )


# Every model of the test config but the locked ones (the keys' allowlist).
ALLOWED = [m["id"] for m in routing_models() if not m["id"].startswith("locked-")] + ["sim-chat"]


@pytest_asyncio.fixture
async def routing_gw(gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> GatewayHandle:
    return await gateway_server(routing_config(make_config, simulator.base_url))


@dataclass
class Acct:
    """A user and one of its keys."""

    user: dict[str, Any]
    key: str


async def new_acct(
    gw: GatewayHandle, models: list[str] | None = ALLOWED, quota_usd: float = 100, **key_fields: Any
) -> Acct:
    user = await gw.create_user(quota_usd=quota_usd)
    key = await gw.create_key(user["id"], name="routing", models=models, **key_fields)
    return Acct(user, key["key"])


@pytest_asyncio.fixture
async def acct(routing_gw: GatewayHandle) -> Acct:
    """A $100 user with a key that may use every model but the ``locked-*`` ones."""
    return await new_acct(routing_gw)
