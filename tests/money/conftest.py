"""Fixtures of the HTTP-level money tests (helpers in ``helpers.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest_asyncio

from gateway.storage.testing import fresh_database

from .helpers import Account, fault_config, new_account

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway


@pytest_asyncio.fixture
async def fault_gw(gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> GatewayHandle:
    """A gateway with the default models plus the fault models of ``helpers.FAULT_MODELS``."""
    return await gateway_server(fault_config(make_config, simulator.base_url))


@pytest_asyncio.fixture
async def account(fault_gw: GatewayHandle) -> Account:
    """A $100 user with one key without a ceiling, on ``fault_gw``."""
    return await new_account(fault_gw)


@pytest_asyncio.fixture
async def fresh_pg_database() -> AsyncIterator[str]:
    """DSN of a PostgreSQL database created for the test and dropped after it; skipped when no
    server answers, unless ``CI=true`` (then it fails)."""
    async for dsn in fresh_database("gw_money"):
        yield dsn
