"""The benchmark's upstream (bench/replay.py): the simulator's answers, recorded once per distinct
request and replayed byte for byte, streams included (Gemini's CRLF-separated events too), so that
what `make bench` measures through it is what the simulator would have answered."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest_asyncio

from bench import replay
from bench.scenarios import all_scenarios, headers
from gateway.wire.sse import split_events
from tests.conftest import SimulatorHandle


@pytest_asyncio.fixture
async def front(simulator: SimulatorHandle) -> AsyncIterator[tuple[str, replay.Recorder]]:
    server, recorder = await replay.start(0, simulator.base_url)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", recorder
    finally:
        server.close()
        await server.wait_closed()
        await recorder.close()


def _events(answer: bytes) -> list[bytes]:
    return [re.sub(rb"[0-9a-f]{20,}", b"<id>", event) for event in split_events(answer)]


async def _post(session: aiohttp.ClientSession, url: str, body: bytes, family: str) -> tuple[int, str, bytes]:
    async with session.post(url, data=body, headers=headers(family, "sk-sim")) as resp:
        return resp.status, resp.headers.get("content-type", ""), await resp.read()


async def test_every_scenario_is_answered_as_the_simulator_answers(
        simulator: SimulatorHandle, front: tuple[str, replay.Recorder]) -> None:
    base, recorder = front
    scenarios = [s for s in all_scenarios(8, 50) if s.kind != "embed"]
    async with aiohttp.ClientSession() as session:
        for scenario in scenarios:
            path, body = scenario.direct_request()
            direct = await _post(session, simulator.base_url + path, body, scenario.family)
            recorded = await _post(session, base + path, body, scenario.family)
            replayed = await _post(session, base + path, body, scenario.family)
            assert direct[0] == recorded[0] == replayed[0] == 200, scenario.name
            assert direct[1] == recorded[1] == replayed[1], scenario.name
            assert recorded[2] == replayed[2], scenario.name
            # The same answer but for its ids (fresh in each of the simulator's answers); a stream
            # event for event, in order.
            assert _events(replayed[2]) == _events(direct[2]) != [], scenario.name
    distinct = len({s.direct_request() for s in scenarios})  # some scenarios send the same request
    assert (recorder.recorded, recorder.replayed) == (distinct, 2 * len(scenarios) - distinct)


async def test_an_error_is_passed_on_and_never_kept(front: tuple[str, replay.Recorder]) -> None:
    base, recorder = front
    body = orjson.dumps({"model": "sim-chat", "messages": "not a list"})
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            status, _, answer = await _post(session, base + "/v1/chat/completions", body, "chat")
            assert status == 400 and b"error" in answer
    assert (recorder.recorded, recorder.replayed) == (0, 0)
