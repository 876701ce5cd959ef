"""Shared pieces of the hardening tests: raw HTTP over a socket (for what aiohttp refuses to send),
and a gateway whose models include aliases of every text protocol."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest_asyncio

from tests.conftest import GatewayHandle, MakeConfig, StartGateway

ALIASES = {"alias-gemini": ("v1beta", "sim-gemini"), "alias-claude": ("messages", "sim-claude"),
           "alias-chat": ("chat", "sim-chat")}


def alias_config(make_config: MakeConfig, simulator_url: str, **overrides: Any) -> Any:
    models = [{"id": public, "price": {"input_per_mtok": 1, "output_per_mtok": 1}} for public in ALIASES]
    upstreams = [{"name": f"up-{public}", "protocol": protocol, "base_url": simulator_url,
                  "api_key": "sk-sim", "models": {public: real}}
                 for public, (protocol, real) in ALIASES.items()]
    return make_config(extra_models=models, extra_upstreams=upstreams, **overrides)


async def user_and_key(handle: GatewayHandle, quota_usd: float = 100) -> GatewayHandle:
    handle.user = await handle.create_user(quota_usd=quota_usd)
    handle.key_record = await handle.create_key(handle.user["id"], name="hardening")
    return handle


@pytest_asyncio.fixture
async def agw(gateway_server: StartGateway, make_config: MakeConfig, simulator: Any) -> GatewayHandle:
    """A gateway with the default models plus one alias per text protocol, a user and a key."""
    return await user_and_key(await gateway_server(alias_config(make_config, simulator.base_url)))


async def raw_http(base_url: str, data: bytes, *, read_timeout: float = 10.0) -> bytes:
    """Send ``data`` as they are on a fresh connection; everything the server sends until it closes."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        chunks = []
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), read_timeout)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        writer.close()


def split_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body
