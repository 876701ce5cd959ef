"""The benchmark's upstream (bench/replay.py): the simulator's answers, recorded once per distinct
request and replayed byte for byte, streams included (Gemini's CRLF-separated events too), so that
what `make bench` measures through it is what the simulator would have answered."""

from __future__ import annotations

import re
import time
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
    """An answer's events with its ids and its ``created`` second taken out: the direct call and
    the recorded one may fall on either side of a second."""
    return [re.sub(rb'"created":[0-9]+', b'"created":<t>', re.sub(rb"[0-9a-f]{20,}", b"<id>", event))
            for event in split_events(answer)]


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


async def test_a_paced_stream_is_replayed_with_its_pauses(front: tuple[str, replay.Recorder]) -> None:
    """A model id with ``tok<MS>`` makes the simulator pause between tokens; the replay keeps the
    pauses (the bench's time to first byte is measured on such streams), and sends the first event
    without waiting for the others."""
    base, recorder = front
    body = orjson.dumps({"model": "sim-chat-tok40", "stream": True,
                         "messages": [{"role": "user", "content": "sim:tokens=4 paced"}]})
    async with aiohttp.ClientSession() as session:
        for _ in range(2):  # recorded, then replayed
            async with session.post(base + "/v1/chat/completions", data=body,
                                    headers=headers("chat", "sk-sim")) as resp:
                arrivals: list[tuple[float, bytes]] = []
                async for chunk in resp.content.iter_any():
                    arrivals.append((time.perf_counter(), chunk))
    assert recorder.replayed == 1
    events = split_events(b"".join(chunk for _, chunk in arrivals))
    assert len(events) >= 5 and events[-1] == b"data: [DONE]\n\n"
    # Three pauses of 40 ms between the four tokens: at least 100 ms from the first arrival to the
    # last, and the first token came before most of that.
    assert arrivals[-1][0] - arrivals[0][0] >= 0.1
    assert b"chat.completion.chunk" in arrivals[0][1]
