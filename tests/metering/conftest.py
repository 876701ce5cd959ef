"""Every test taking ``storage`` runs on SQLite and on PostgreSQL (see gateway.storage.testing)."""

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from gateway.accounts.metering.meter import Meter
from gateway.storage.base import Storage
from gateway.storage.testing import database_url, new_principal, pg_database, storage

__all__ = ["database_url", "meters", "new_principal", "pg_database", "storage"]


@pytest_asyncio.fixture
async def meters(storage: Storage) -> AsyncIterator[Callable[..., Meter]]:
    """``meters(instance="inst-a", **kwargs)``: a Meter on ``storage``; every one made is stopped at
    the end."""
    made: list[Meter] = []

    def make(instance: str = "inst-a", **kwargs: Any) -> Meter:
        meter = Meter(storage, instance, **kwargs)
        made.append(meter)
        return meter

    yield make
    for meter in made:
        await meter.stop(timeout_s=5)
