"""Fixtures for the upstream simulator tests: one simulator per session on an ephemeral port."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import anthropic
import openai
import pytest_asyncio
from google import genai
from google.genai import types

from gateway_simulator import start_simulator
from gateway_simulator.server import SimulatorRunner


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def sim() -> AsyncIterator[SimulatorRunner]:
    runner = await start_simulator(port=0)
    yield runner
    await runner.cleanup()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def base_url(sim: SimulatorRunner) -> str:
    return f"http://127.0.0.1:{sim.sim_port}"


@pytest_asyncio.fixture(loop_scope="session")
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest_asyncio.fixture(loop_scope="session")
async def oai(base_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-sim", max_retries=0)
    yield client
    await client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def claude(base_url: str) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-sim", max_retries=0)
    yield client
    await client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def gem(base_url: str) -> AsyncIterator[genai.Client]:
    client = genai.Client(
        api_key="sk-sim", http_options=types.HttpOptions(base_url=base_url, api_version="v1beta")
    )
    yield client
    await client.aio.aclose()
    client.close()
