"""A gateway in front of a hostile upstream, and the checks every attack through it makes.

``front`` (a fixture: import it into the test module) starts a gateway whose ``hostile-<protocol>``
models are served by upstreams of the same names at the hostile server's URL, with small limits
(so that each point is reached fast), one attempt per call, and an openai SDK client with a key.
``attack`` sends one chat call per protocol at once while ``/healthz`` is sampled and this
process's peak memory is watched; ``assert_clean_502`` and ``assert_unharmed`` say what the issue
asks of every attack.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import openai
import orjson
import pytest
import pytest_asyncio
from openai.types.chat import ChatCompletionMessageParam

from tests.conftest import GatewayHandle, MakeConfig, StartGateway
from tests.hostile.upstream import MIB, Connection, HealthzSampler, PeakRss, log_faults

PROTOCOLS = ("chat", "messages", "v1beta")
BOTH = (False, True)  # a fault in the head fails a streamed call the same way, before any output
TOTAL_S = 2.0  # upstreams[].timeouts.total_s: the cut of a dripped body
REFUSED_WITHIN_S = 1.5  # an answer refused on sight fails before total_s could have cut it
LIMITS = {"upstream_body_bytes": 4 * MIB, "upstream_header_bytes": 8192, "upstream_header_count": 100,
          "sse_event_bytes": MIB, "stream_element_bytes": MIB}
# first_byte_s and idle_s out of the way: only total_s (or the answer's refusal) may end an attack
TIMEOUTS = {"connect_s": 2.0, "first_byte_s": 30.0, "idle_s": 30.0, "total_s": TOTAL_S}
RSS_GROWTH_BOUND = 64 * MIB
HEALTHZ_SLACK_S = 0.1
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]

COMPLETION = orjson.dumps({
    "id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": "up-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


def json_answer(body: bytes, status: str = "200 OK", *headers: str) -> bytes:
    """A well-formed keep-alive answer."""
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {len(body)}",
             *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def answer_every_request(conn: Connection) -> None:
    """A working chat upstream: every request on the connection gets ``COMPLETION``."""
    while await conn.request() is not None:
        await conn.send(json_answer(COMPLETION))


@dataclass
class Front:
    gw: GatewayHandle
    client: openai.AsyncOpenAI


StartFront = Callable[..., Awaitable[Front]]


@pytest_asyncio.fixture
async def front(gateway_server: StartGateway, make_config: MakeConfig,
                caplog: pytest.LogCaptureFixture) -> StartFront:
    """``await front(base_url, protocols=..., attempts=1, timeouts={...}, **config)``."""
    caplog.set_level(logging.INFO)

    async def start(base_url: str, *, protocols: Iterable[str] = PROTOCOLS, attempts: int = 1,
                    timeouts: Mapping[str, float] | None = None, **config: Any) -> Front:
        models = [{"id": f"hostile-{p}", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}
                  for p in protocols]
        upstreams = [{"name": f"hostile-{p}", "protocol": p, "base_url": base_url, "api_key": "sk-hostile",
                      "models": {f"hostile-{p}": "up-model"}, "timeouts": {**TIMEOUTS, **(timeouts or {})}}
                     for p in protocols]
        gw = await gateway_server(make_config(
            extra_models=models, extra_upstreams=upstreams, limits=LIMITS,
            routing={"max_attempts": attempts, "cooldown_s": 0.01}, **config))
        gw.user = await gw.create_user(quota_usd=100)
        gw.key_record = await gw.create_key(gw.user["id"], name="hostile")
        client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0, timeout=60)
        return Front(gw, client)

    return start


@dataclass
class Outcome:
    model: str
    stream: bool
    status: int
    body: Any  # the error envelope, or what was served
    elapsed_s: float


async def chat(client: openai.AsyncOpenAI, model: str, stream: bool = False) -> Outcome:
    """One chat call; an error answer is an Outcome too (its status and JSON body)."""
    started = time.perf_counter()
    try:
        if stream:
            chunks = [c async for c in await client.chat.completions.create(
                model=model, messages=HELLO, max_tokens=8, stream=True)]
            served: Any = [c.model_dump() for c in chunks]
        else:
            served = (await client.chat.completions.create(
                model=model, messages=HELLO, max_tokens=8)).model_dump()
    except openai.APIStatusError as exc:
        return Outcome(model, stream, exc.status_code, exc.response.json(), time.perf_counter() - started)
    return Outcome(model, stream, 200, served, time.perf_counter() - started)


@dataclass
class Attack:
    outcomes: list[Outcome]
    idle_p99_s: float
    healthz: HealthzSampler
    rss_growth_bytes: int


async def attack(front: Front, caplog: pytest.LogCaptureFixture, protocols: Iterable[str] = PROTOCOLS,
                 streams: Iterable[bool] = (False,)) -> Attack:
    """One call per protocol (and per ``streams``) at once, ``/healthz`` sampled all along."""
    sampler = HealthzSampler(front.gw.http, front.gw.base_url)
    idle = await sampler.idle_p99()
    caplog.clear()
    calls = [chat(front.client, f"hostile-{p}", s) for p in protocols for s in streams]
    with PeakRss() as rss:
        async with sampler.running():
            outcomes = await asyncio.gather(*calls)
    return Attack(list(outcomes), idle, sampler, rss.growth_bytes)


def assert_clean_502(outcome: Outcome, within_s: float = REFUSED_WITHIN_S) -> None:
    where = (outcome.model, outcome.stream, outcome.status, str(outcome.body)[:300])
    assert outcome.status == 502, where
    assert set(outcome.body) == {"error"}, where
    error = outcome.body["error"]
    assert error["code"] == "upstream_error" and error["type"] and error["message"], where
    assert "Traceback" not in error["message"], where
    assert outcome.elapsed_s < within_s, (f"took {outcome.elapsed_s:.2f}s", where)


async def assert_unharmed(front: Front, caplog: pytest.LogCaptureFixture, attacked: Attack,
                          warned: Mapping[str, int], rss_bound: int = RSS_GROWTH_BOUND) -> None:
    """What every attack must leave: /healthz answered on time, memory, logs, the next call.
    ``warned``: how many WARNING lines must name each upstream (one per failed attempt)."""
    assert attacked.healthz.p99 <= attacked.idle_p99_s + HEALTHZ_SLACK_S, \
        (f"idle p99 {attacked.idle_p99_s * 1000:.1f} ms", attacked.healthz.stats())
    assert attacked.rss_growth_bytes < rss_bound, f"peak RSS grew {attacked.rss_growth_bytes / MIB:.0f} MiB"
    for upstream, count in warned.items():
        named = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and upstream in r.getMessage()]
        assert len(named) == count, (upstream, named)
    served = await chat(front.client, "sim-chat")
    assert served.status == 200, served
    assert log_faults(caplog.records) == []


async def survive(front: Front, caplog: pytest.LogCaptureFixture, within_s: float = REFUSED_WITHIN_S,
                  streams: Iterable[bool] = (False,), rss_bound: int = RSS_GROWTH_BOUND) -> Attack:
    """The usual attack: every protocol's calls a clean 502 within ``within_s``, each failed
    attempt one warning naming its upstream, and the gateway unharmed."""
    streams = tuple(streams)
    attacked = await attack(front, caplog, streams=streams)
    for outcome in attacked.outcomes:
        assert_clean_502(outcome, within_s)
    await assert_unharmed(front, caplog, attacked, {f"hostile-{p}": len(streams) for p in PROTOCOLS},
                          rss_bound)
    return attacked
