"""bench/protocol_cost.py: both protocols serve its keep-alive requests to the end (a protocol
change that broke the in-memory harness would otherwise show only as a hang in the benchmark)."""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bench import protocol_cost
from gateway import uvicorn_protocol
from gateway.uvicorn_protocol import GatewayHttpTools


async def test_each_protocol_answers_every_request() -> None:
    copy = protocol_cost._protocol_of(uvicorn_protocol.__file__, "copy")
    async with asyncio.timeout(30):
        figures = await protocol_cost.measure({"uvicorn": HttpToolsProtocol, "gateway": GatewayHttpTools,
                                               "copy": copy}, requests=50, blocks=2)
    assert set(figures) == {"uvicorn", "gateway", "copy"}
    assert all(len(values) == 2 and all(v > 0 for v in values) for values in figures.values())
