"""An operator's reset of an upstream's cool-down (``POST /admin/upstreams/{name}/reset``, the
Upstreams page's button) reaches every worker of a ``gateway serve --workers 2``: health lives in
each process, and the worker that answers leaves a notice the other one reads on its signal."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
import pytest_asyncio

from tests.ops.test_lifecycle import ADMIN_KEY, Served, make_key, no_errors_logged, serving
from tests.serving import free_port

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
LOOKS = 16  # fresh connections: each reaches one of the two workers, as the kernel spreads them


@pytest_asyncio.fixture(params=["granian", "uvicorn"])
async def served(request: pytest.FixtureRequest, tmp_path: Path, simulator: Any) -> AsyncIterator[Served]:
    port = free_port()
    data = {
        "listen": {"host": "127.0.0.1", "port": port},
        "database": f"sqlite:///{tmp_path}/gateway.db",
        "admin_key": ADMIN_KEY,
        "simulator": {"enabled": False},
        "models": [{"id": "sim-chat", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}],
        "upstreams": [
            {
                "name": "dead",
                "protocol": "chat",
                "base_url": f"http://127.0.0.1:{free_port()}",
                "api_key": "sk-x",
                "models": ["sim-chat"],
                "priority": -1,
            },
            {
                "name": "sim",
                "protocol": "chat",
                "base_url": simulator.base_url,
                "api_key": "sk-sim",
                "models": ["sim-chat"],
            },
        ],
    }
    path = tmp_path / "gateway.yaml"
    path.write_bytes(orjson.dumps(data))  # JSON is YAML
    async with serving(tmp_path, path, request.param, port, workers=2) as running:
        await asyncio.sleep(1.0)  # both workers' apps up (each registers once it can be signalled)
        yield running


async def dead_states(base_url: str) -> list[str]:
    """The ``dead`` upstream's state as LOOKS answers (from either worker) show it."""
    states = []
    for _ in range(LOOKS):
        async with (
            aiohttp.ClientSession(headers=ADMIN) as http,
            http.get(base_url + "/admin/upstreams") as resp,
        ):
            rows = (await resp.json())["data"]
        states.append(next(r["state"] for r in rows if r["name"] == "dead"))
    return states


async def test_a_reset_ends_the_cool_down_in_every_worker(served: Served) -> None:
    key = await make_key(served.base_url)
    # Calls over fresh connections until every look finds ``dead`` cooling down: both workers tried
    # it (and failed over to ``sim``).
    for _ in range(20):
        for _ in range(4):
            async with openai.AsyncOpenAI(
                base_url=served.base_url + "/v1", api_key=key, max_retries=0
            ) as client:
                await client.chat.completions.create(
                    model="sim-chat", messages=[{"role": "user", "content": "x"}]
                )
        if set(await dead_states(served.base_url)) == {"cooling_down"}:
            break
    else:
        pytest.fail("the dead upstream never cooled down in both workers")

    async with (
        aiohttp.ClientSession(headers=ADMIN) as http,
        http.post(served.base_url + "/admin/upstreams/dead/reset") as resp,
    ):
        assert resp.status == 200 and (await resp.json())["state"] == "healthy"
    await asyncio.sleep(0.2)  # the other worker's signal handler runs on its event loop
    assert set(await dead_states(served.base_url)) == {"healthy"}
    no_errors_logged(served.log)
