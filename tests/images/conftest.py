"""Fixtures of the Images API tests (issue 36 point 6): a gateway with image models on the session
simulator, official ``openai`` clients, and readers of the books (request log, ledger, balance).

Fault options ride on the upstream credential (``gateway_simulator.context``): ``sk-sim-fail503``
fails every call. A prompt holding ``[[images:K]]`` makes the simulator return K images whatever
``n`` asks (``translators.images.simulator``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import openai
import pytest_asyncio

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

PER_IMAGE_USD = 0.04
PER_IMAGE_NANO = 40_000_000
BACKUP_PER_IMAGE_USD = 0.1
BACKUP_PER_IMAGE_NANO = 100_000_000
START_USD = 100
START_NANO = START_USD * 10**9
PNG_1PX = bytes.fromhex(  # a 1x1 transparent PNG
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

IMAGE_MODELS = [
    {"id": "img-sim", "owned_by": "simulator", "price": {"per_image": PER_IMAGE_USD}},
    {"id": "img-down", "owned_by": "simulator", "price": {"per_image": PER_IMAGE_USD}},
    {"id": "img-failover", "owned_by": "simulator", "price": {"per_image": PER_IMAGE_USD}},
    {"id": "img/*", "price": {"per_image": 0.01}},
    # img-primary's upstream always fails; the test keys may not use img-locked, and img-tokened is
    # priced by tokens only: both are skipped, and img-backup (dearer per image) serves.
    {
        "id": "img-primary",
        "price": {"per_image": PER_IMAGE_USD},
        "fallbacks": ["img-locked", "img-tokened", "img-backup"],
    },
    {"id": "img-locked", "price": {"per_image": 0.001}},
    {"id": "img-tokened", "price": {"input_per_mtok": 1, "output_per_mtok": 1}},
    {"id": "img-backup", "price": {"per_image": BACKUP_PER_IMAGE_USD}},
    {"id": "img-cut", "price": {"per_image": PER_IMAGE_USD}},  # its answer breaks off half-way
]


def image_upstreams(sim_url: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "sim-images",
            "protocol": "chat",
            "base_url": sim_url,
            "api_key": "sk-sim",
            "models": {
                "img-sim": "sim-image-1",
                "img-locked": "sim-image-1",
                "img-tokened": "sim-image-1",
                "img-backup": "sim-image-2",
            },
        },
        {
            "name": "sim-images-down",
            "protocol": "chat",
            "base_url": sim_url,
            "api_key": "sk-sim-fail503",
            "models": ["img-down", "img-failover", "img-primary"],
        },
        {
            "name": "sim-images-backup",
            "protocol": "chat",
            "base_url": sim_url,
            "api_key": "sk-sim",
            "models": ["img-failover"],
            "priority": 1,
        },
        {
            "name": "sim-images-cut",
            "protocol": "chat",
            "base_url": sim_url,
            "api_key": "sk-sim-cut1",
            "models": ["img-cut"],
        },
        {
            "name": "sim-images-wild",
            "protocol": "chat",
            "base_url": sim_url,
            "api_key": "sk-sim",
            "models": ["img/*"],
        },
    ]


def images_config(make_config: MakeConfig, sim_url: str, **overrides: Any) -> Any:
    return make_config(
        extra_models=IMAGE_MODELS,
        extra_upstreams=image_upstreams(sim_url),
        routing={"max_attempts": 2, "cooldown_s": 30.0},
        **overrides,
    )


@dataclass
class Images:
    gw: GatewayHandle
    sim_url: str
    user_id: int
    key: str
    key_id: int

    def client(self, key: str | None = None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.gw.base_url + "/v1", api_key=key or self.key, max_retries=0)

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of the gateway's SQLite database, read on a connection of the test's own."""
        path = Path(self.gw.gateway.config.database.removeprefix("sqlite:///"))
        with sqlite3.connect(path) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(sql, params)]

    async def logs(self) -> list[dict[str, Any]]:
        await self.gw.gateway.meter.flush()
        return self.query("SELECT * FROM request_logs WHERE user_id = ? ORDER BY id", (self.user_id,))

    def ledger(self, request_id: str) -> list[dict[str, Any]]:
        return self.query(
            "SELECT kind, charge_nano, delta_nano FROM ledger WHERE request_id = ? ORDER BY id", (request_id,)
        )

    async def balance(self) -> int:
        await self.gw.gateway.meter.flush()
        user = await self.gw.gateway.storage.get_user(self.user_id)
        assert user is not None
        return int(user.balance_nano)

    async def upstream_calls(self) -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as http, http.get(self.sim_url + "/_sim/requests") as resp:
            entries: list[dict[str, Any]] = await resp.json()
        return [e for e in entries if e["path"].startswith("/v1/images/")]

    async def clear_upstream_log(self) -> None:
        async with aiohttp.ClientSession() as http, http.delete(self.sim_url + "/_sim/requests"):
            pass

    async def books_balance(self) -> None:
        """No hold left open, and the audit of balances against the ledger is clean."""
        await self.gw.gateway.meter.flush(return_leases=True)
        assert await self.gw.gateway.storage.open_reservations() == []
        assert await self.gw.gateway.storage.audit() == []


async def start(gw: GatewayHandle, sim_url: str, user_usd: float = START_USD, **key_fields: Any) -> Images:
    """A user with ``user_usd`` and one key (``key_fields``: the admin API's, e.g. ``quota_usd``)."""
    user = await gw.create_user(quota_usd=user_usd)
    key = await gw.create_key(user["id"], name="images", **key_fields)
    return Images(gw, sim_url, user["id"], key["key"], key["id"])


@pytest_asyncio.fixture
async def images(gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> Images:
    gw = await gateway_server(images_config(make_config, simulator.base_url))
    setup = await start(gw, simulator.base_url)
    await setup.clear_upstream_log()
    return setup
