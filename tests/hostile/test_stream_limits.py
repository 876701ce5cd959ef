"""Stream limits (issue 32, point 3, the stream half): an upstream stream whose frame never ends.

A scripted upstream (aiohttp.web, this module) streams, for every text protocol, one frame that
never ends: an SSE event whose blank line never comes (many ``data:`` lines, or one endless line)
and, for v1beta without ``alt=sse``, a JSON array element that never closes; 20 MB of it, against a
gateway whose ``limits.sse_event_bytes`` and ``limits.stream_element_bytes`` are 1 MiB. Either
straight away or after a first piece of output ("hello"). Each family's client (the openai SDK for
chat, onto every upstream protocol; the anthropic SDK for messages; aiohttp for v1beta in both
framings and for the Responses API onto a native upstream) must see:

* after output: what was delivered, then its family's own stream error event (``upstream_error``),
  the call logged as ``upstream_cut`` and charged what was delivered, not the megabytes;
* before output: a failed attempt, so a 502 ``upstream_error`` in its family's envelope and nothing
  charged, or, with another upstream to fail over to, the answer of that one;
* either way: this process's peak memory (the embedded gateway runs in it) grows far less than
  what was sent, exactly one WARNING names the upstream, no traceback is logged, and the next call
  is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import orjson
import pytest
import pytest_asyncio
from aiohttp import web

from tests import loopback
from tests.conftest import GatewayHandle, MakeConfig, StartGateway
from tests.hostile.upstream import MIB, PeakRss, log_faults

LIMIT = 1 * MIB  # limits.sse_event_bytes and limits.stream_element_bytes of the gateway under test
SENT = 20 * MIB  # what the upstream would send of the frame that never ends
RSS_BOUND = 8 * MIB  # peak memory growth allowed while it does (the frame alone would be 20 MiB)
WHEN = ("before", "after")  # the attack before any output, or after "hello" went out
HELLO = [{"role": "user", "content": "hi"}]

# --- the upstream ----------------------------------------------------------------------------------

CHAT_HELLO = (b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":'
              b'[{"index":0,"delta":{"role":"assistant","content":"hello"}}]}\n\n')
MESSAGES_HELLO = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"up","content":[],"stop_reason":null,"stop_sequence":null,'
    b'"usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hello"}}\n\n')
RESPONSES_HELLO = (
    b'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":'
    b'{"id":"resp_up","object":"response","created_at":1,"status":"in_progress","model":"up",'
    b'"output":[]}}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
    b'"sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hello"}\n\n')
GEMINI_HELLO = (b'{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"index":0}],'
                b'"modelVersion":"up"}')
BLOCK = 64 * 1024
# The frame that never ends, a block at a time: "lines" many short data lines and no blank line,
# "line" one endless line, "element" one array element that never closes.
OPENINGS = {"lines": b"", "line": b"data: ", "element": b'{"candidates":[{"content":{"parts":[{"text":"'}
BLOCKS = {"lines": (b"data: " + b"a" * 1017 + b"\n") * 64, "line": b"a" * BLOCK, "element": b"a" * BLOCK}


def hello_of(protocol: str, array: bool) -> bytes:
    if protocol == "v1beta":
        return b"[" + GEMINI_HELLO + b",\r\n" if array else b"data: " + GEMINI_HELLO + b"\r\n\r\n"
    return {"chat": CHAT_HELLO, "messages": MESSAGES_HELLO, "responses": RESPONSES_HELLO}[protocol]


async def _stream(request: web.Request) -> web.StreamResponse:
    """The upstream model names the script: ``up-<kind>-<when>``."""
    if "model" in request.match_info:
        protocol, model = "v1beta", request.match_info["model"]
    else:
        protocol = {"/v1/chat/completions": "chat", "/v1/messages": "messages",
                    "/v1/responses": "responses"}[request.path]
        model = orjson.loads(await request.read())["model"]
    _, kind, when = model.split("-")
    array = protocol == "v1beta" and request.query.get("alt") != "sse"
    response = web.StreamResponse(headers={"Content-Type": "application/json" if array
                                           else "text/event-stream"})
    await response.prepare(request)
    opening = hello_of(protocol, array) if when == "after" else b"[" if array else b""
    with contextlib.suppress(ConnectionError):  # the gateway hangs up at the limit: the point
        await response.write(opening + OPENINGS[kind])
        for _ in range(SENT // len(BLOCKS[kind])):
            await response.write(BLOCKS[kind])
    return response


@pytest_asyncio.fixture
async def hostile() -> AsyncIterator[str]:
    app = web.Application()
    for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1beta/models/{model}:{method}"):
        app.router.add_post(path, _stream)
    async with loopback.serving(app, handler_cancellation=True) as base:
        yield base


UPSTREAMS = {"chat": {"protocol": "chat"}, "messages": {"protocol": "messages"},
             "v1beta": {"protocol": "v1beta"}, "responses": {"protocol": "chat", "features": ["responses"]}}
KINDS = {"chat": ("lines", "line"), "messages": ("lines", "line"), "responses": ("lines", "line"),
         "v1beta": ("lines", "line", "element")}


def public(upstream: str, kind: str, when: str) -> str:
    return f"lim-{upstream}-{kind}-{when}"


FAILOVER = "lim-failover"  # the hostile chat upstream first, the simulator's chat second


@pytest_asyncio.fixture
async def lgw(gateway_server: StartGateway, make_config: MakeConfig, hostile: str,
              caplog: pytest.LogCaptureFixture) -> GatewayHandle:
    caplog.set_level(logging.INFO)
    models, upstreams = [], []
    for name, shape in UPSTREAMS.items():
        served = {public(name, k, w): f"up-{k}-{w}" for k in KINDS[name] for w in WHEN}
        models += [{"id": m, "price": {"input_per_mtok": 1, "output_per_mtok": 1}} for m in served]
        upstreams.append({"name": f"limits-{name}", **shape, "base_url": hostile, "api_key": "sk-up",
                          "models": served})
    handle = await gateway_server(make_config(
        extra_models=models, extra_upstreams=upstreams, routing={"max_attempts": 1, "cooldown_s": 0.01},
        limits={"sse_event_bytes": LIMIT, "stream_element_bytes": LIMIT}))
    handle.user = await handle.create_user(quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="limits")
    return handle


# --- the clients -----------------------------------------------------------------------------------

@dataclass
class Seen:
    """What a client saw of one streamed call."""

    status: int
    code: str | None  # the error's code (``upstream_error``), if an error came
    texts: list[str] = field(default_factory=list)


async def chat_call(gw: GatewayHandle, model: str) -> Seen:
    client = openai.AsyncOpenAI(base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0, timeout=30)
    seen = Seen(200, None)
    try:
        stream = await client.chat.completions.create(model=model, messages=HELLO,
                                                      max_tokens=8, stream=True)
        async for chunk in stream:
            seen.texts += [c.delta.content for c in chunk.choices if c.delta.content]
    except openai.APIStatusError as exc:
        seen.status, seen.code = exc.status_code, exc.body["code"]
    except openai.APIError as exc:  # an error event in the stream
        seen.code = exc.body["code"]
    finally:
        await client.close()
    return seen


async def messages_call(gw: GatewayHandle, model: str) -> Seen:
    client = anthropic.AsyncAnthropic(base_url=gw.base_url, api_key=gw.key, max_retries=0, timeout=30)
    seen = Seen(200, None)
    try:
        stream = await client.messages.create(model=model, messages=HELLO, max_tokens=8,
                                              stream=True)
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                seen.texts.append(event.delta.text)
    except anthropic.APIStatusError as exc:  # a 502, or the error event in the stream (status 200)
        seen.status, seen.code = exc.status_code, exc.body["error"]["code"]
    finally:
        await client.close()
    return seen


def sse_data(body: bytes) -> list[Any]:
    return [orjson.loads(line[5:]) for line in body.replace(b"\r\n", b"\n").split(b"\n")
            if line.startswith(b"data:")]


async def v1beta_call(gw: GatewayHandle, model: str, sse: bool) -> Seen:
    method = "streamGenerateContent" + ("?alt=sse" if sse else "")
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    async with gw.http.post(f"{gw.base_url}/v1beta/models/{model}:{method}", json=body,
                            headers={"x-goog-api-key": gw.key}) as resp:
        status, raw = resp.status, await resp.read()
    if status != 200:
        return Seen(status, orjson.loads(raw)["error"]["details"][0]["reason"])
    objects = sse_data(raw) if sse else orjson.loads(raw)  # the array stays valid JSON, error and all
    errors = [o["error"]["details"][0]["reason"] for o in objects if "error" in o]
    texts = [p["text"] for o in objects for c in o.get("candidates", []) for p in c["content"]["parts"]]
    return Seen(status, errors[-1] if errors else None, texts)


async def responses_call(gw: GatewayHandle, model: str) -> Seen:
    body = {"model": model, "input": "hi", "stream": True}
    async with gw.http.post(f"{gw.base_url}/v1/responses", json=body,
                            headers={"Authorization": f"Bearer {gw.key}"}) as resp:
        status, raw = resp.status, await resp.read()
    if status != 200:
        return Seen(status, orjson.loads(raw)["error"]["code"])
    events = sse_data(raw)
    errors = [e["code"] for e in events if e["type"] == "error"]
    return Seen(status, errors[-1] if errors else None,
                [e["delta"] for e in events if e["type"] == "response.output_text.delta"])


Call = Callable[[GatewayHandle, str], Awaitable[Seen]]

# --- the checks ------------------------------------------------------------------------------------


async def logged(gw: GatewayHandle, model: str) -> dict[str, Any]:
    """The request-log row of the (one) call to ``model``."""
    rows = (await gw.admin("GET", f"/admin/logs?model={model}")).json()["data"]
    assert len(rows) == 1, rows
    return rows[0]


async def attack(gw: GatewayHandle, caplog: pytest.LogCaptureFixture, call: Call, upstream: str, kind: str,
                 when: str, healthy: str) -> None:
    """One call into a frame that never ends, and what every such call must leave behind."""
    model = public(upstream, kind, when)
    caplog.clear()
    with PeakRss() as rss:
        seen = await asyncio.wait_for(call(gw, model), 30)
    where = (model, seen, f"peak RSS +{rss.growth_bytes / MIB:.1f} MiB")
    assert rss.growth_bytes < RSS_BOUND, where
    assert seen.code == "upstream_error", where
    warned = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING and f"limits-{upstream}" in r.getMessage()]
    assert len(warned) == 1 and "larger than" in warned[0], (where, warned)
    assert log_faults(caplog.records) == [], where
    row = await logged(gw, model)
    assert row["upstream"] == f"limits-{upstream}" and row["error_code"] == "upstream_error", (where, row)
    served = await call(gw, healthy)
    assert served.status == 200 and served.code is None and served.texts, (where, "next call", served)
    if when == "after":
        # The client has what was delivered, then the family's error event; the call is charged
        # that (a token or two), never the megabytes it did not deliver.
        assert seen.status == 200 and seen.texts == ["hello"], where
        assert row["outcome"] == "upstream_cut" and 0 < row["completion_tokens"] <= 5, (where, row)
    else:
        # Nothing went out yet: a failed attempt like a refused connection, nothing charged.
        assert seen.status == 502 and seen.texts == [], where
        assert row["outcome"] == "upstream_error" and row["charge_nano"] == 0, (where, row)


def cases(upstreams: tuple[str, ...],
          kinds: tuple[str, ...] = ("lines", "line")) -> list[tuple[str, str, str]]:
    return [(u, k, w) for u in upstreams for k in kinds for w in WHEN]


async def test_chat_client_onto_every_protocol(lgw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> None:
    """Chat onto chat (the fast path), messages and v1beta (``alt=sse``: translated)."""
    for upstream, kind, when in cases(("chat", "messages", "v1beta")):
        await attack(lgw, caplog, chat_call, upstream, kind, when, "sim-chat")


async def test_messages_client(lgw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> None:
    for upstream, kind, when in cases(("messages",)):
        await attack(lgw, caplog, messages_call, upstream, kind, when, "sim-claude")


@pytest.mark.parametrize("sse", [True, False], ids=["alt=sse", "array"])
async def test_v1beta_client(lgw: GatewayHandle, caplog: pytest.LogCaptureFixture, sse: bool) -> None:
    async def call(gw: GatewayHandle, model: str) -> Seen:
        return await v1beta_call(gw, model, sse)

    for upstream, kind, when in cases(("v1beta",), ("lines", "line") if sse else ("element",)):
        await attack(lgw, caplog, call, upstream, kind, when, "sim-gemini")


async def test_responses_client_onto_a_native_upstream(lgw: GatewayHandle,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    for upstream, kind, when in cases(("responses",)):
        await attack(lgw, caplog, responses_call, upstream, kind, when, "sim-chat")


async def test_before_any_output_the_next_upstream_answers(gateway_server: StartGateway,
                                                          make_config: MakeConfig, hostile: str,
                                                          simulator: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """With a second upstream to try, the client never knows: the oversized first event failed
    the attempt before anything was sent."""
    caplog.set_level(logging.INFO)
    upstreams = [{"name": "limits-chat", "protocol": "chat", "base_url": hostile, "api_key": "sk-up",
                  "models": {FAILOVER: "up-lines-before"}},
                 {"name": "limits-fallback", "protocol": "chat", "base_url": simulator.base_url,
                  "api_key": "sk-sim", "priority": 1, "models": {FAILOVER: "sim-chat"}}]
    gw = await gateway_server(make_config(
        extra_models=[{"id": FAILOVER, "price": {"input_per_mtok": 1, "output_per_mtok": 1}}],
        extra_upstreams=upstreams, routing={"max_attempts": 2, "cooldown_s": 0.01},
        limits={"sse_event_bytes": LIMIT, "stream_element_bytes": LIMIT}))
    gw.user = await gw.create_user(quota_usd=100)
    gw.key_record = await gw.create_key(gw.user["id"], name="limits")
    caplog.clear()
    with PeakRss() as rss:
        seen = await asyncio.wait_for(chat_call(gw, FAILOVER), 30)
    assert seen.status == 200 and seen.code is None and seen.texts, seen
    assert rss.growth_bytes < RSS_BOUND, f"peak RSS +{rss.growth_bytes / MIB:.1f} MiB"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "limits-chat" in warned[0] and "larger than" in warned[0], warned
    assert log_faults(caplog.records) == []
    row = await logged(gw, FAILOVER)
    assert row["outcome"] == "success" and row["upstream"] == "limits-fallback" and row["attempts"] == 2, row
