"""Property 1's limits on the shape of a body: ``limits.json_max_elements`` (array items and object
members), tallied from the bytes as they arrive and counted exactly, when the tally is over, in the
app's body process (``gateway.relay.body_process``), which also answers large ``count_tokens`` bodies.

* the tally is an upper bound of the exact count, however the bytes are split into chunks;
* a body over the limit is refused in each family's envelope; prose full of commas (a tally over
  the limit, an exact count far under it) is served;
* a large ``count_tokens`` body is counted in the body process, with the figure the estimator
  gives in-process, and still counted (here) when that process cannot start;
* the body process answers, refuses as the function refused, reports a bug as ``ChildFailed``, and
  stays in step when a caller leaves mid-job.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.relay.body_process import BodyProcess, ChildFailed
from gateway.relay.offload import INLINE_BYTES
from gateway.runtime.errors import GatewayError
from gateway.wire.json_shape import ElementTally, count_elements
from tests.conftest import MakeConfig, StartGateway
from tests.hardening.conftest import user_and_key
from translators.messages.routes import _count as count_messages_body

COUNT = "gateway.wire.json_shape:count_elements"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(alphabet=st.sampled_from('ab,{}[]":\\ é')),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=4), inner, max_size=6),
    max_leaves=40)


def _exact(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(_exact(v) for v in value.values())
    if isinstance(value, list):
        return len(value) + sum(_exact(v) for v in value)
    return 0


@settings(max_examples=200, deadline=None)
@given(json_values, st.lists(st.integers(min_value=1, max_value=40), max_size=8))
def test_tally_bounds_the_exact_count(value: Any, cuts: list[int]) -> None:
    body = orjson.dumps(value)
    tally, start = ElementTally(), 0
    for cut in cuts:
        tally.feed(body[start:start + cut])
        start += cut
    tally.feed(body[start:])
    exact = count_elements(body, 10**9)
    assert exact == _exact(value)
    assert tally.bound >= exact


def test_count_stops_just_past_the_limit() -> None:
    body = orjson.dumps({"messages": [{"role": "user", "content": "hi"}] * 10_000})
    assert count_elements(body, 10**9) == 1 + 10_000 * 3
    assert 100 < count_elements(body, 100) < 30_001


async def test_body_process_answers_refuses_and_fails() -> None:
    process = BodyProcess()
    try:
        assert await process.call(COUNT, b'{"a": [1, 2, {"b": []}]}', 100) == 5
        with pytest.raises(GatewayError) as refused:
            await process.call(COUNT, b'{"a": [1,', 100)
        assert refused.value.status == 400 and "not valid JSON" in refused.value.message
        with pytest.raises(ChildFailed):  # a bug in the function: reported, the process lives on
            await process.call("gateway.wire.json_shape:count_elements", b"[]")  # missing argument
        assert await process.call(COUNT, b"[[], []]", 100) == 2
    finally:
        await process.aclose()


async def test_body_process_stays_in_step_when_a_caller_leaves() -> None:
    process = BodyProcess()
    big = orjson.dumps([[1, 2]] * 300_000)
    try:
        leaving = asyncio.create_task(process.call(COUNT, big, 10**9))
        await asyncio.sleep(0.01)
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        assert await process.call(COUNT, b'{"x": [1, 2, 3]}', 100) == 4  # not the other job's answer
    finally:
        await process.aclose()


def _messages(model: str, count: int) -> dict[str, Any]:
    return {"model": model, "max_tokens": 5,
            "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": "hi"}
                         for i in range(count | 1)]}


async def test_a_body_over_the_element_limit_is_refused_in_each_family(
        gateway_server: StartGateway, make_config: MakeConfig) -> None:
    gw = await user_and_key(await gateway_server(make_config(limits={"json_max_elements": 1000})))
    anthropic = {"x-api-key": gw.key, "anthropic-version": "2023-06-01"}
    chat = await gw.request("POST", "/v1/chat/completions", json=_messages("sim-chat", 500), key=gw.key)
    messages = await gw.request("POST", "/v1/messages", json=_messages("sim-claude", 500), headers=anthropic)
    counted = await gw.request("POST", "/v1/messages/count_tokens", json=_messages("sim-claude", 500),
                               headers=anthropic)
    contents = [{"role": "user", "parts": [{"text": "hi"}]}] * 300
    gemini = await gw.request("POST", "/v1beta/models/sim-gemini:generateContent",
                              json={"contents": contents}, headers={"x-goog-api-key": gw.key})
    for reply in (chat, messages, counted, gemini):
        assert reply.status == 400, reply.body
        assert "json_max_elements" in reply.body.decode()
        assert reply.headers.get("X-Service-Request-Id")
    assert orjson.loads(chat.body)["error"]["type"] == "invalid_request_error"
    assert orjson.loads(messages.body)["type"] == "error"
    assert orjson.loads(gemini.body)["error"]["status"] == "INVALID_ARGUMENT"
    # Prose full of commas: the tally is far over the limit, the exact count (in the body
    # process) is a handful of elements, and the call is served.
    prose = {"model": "sim-chat", "max_tokens": 5,
             "messages": [{"role": "user", "content": "sim:tokens=2 " + "one, two, " * 5000}]}
    served = await gw.request("POST", "/v1/chat/completions", json=prose, key=gw.key)
    assert served.status == 200, served.body
    fitting = await gw.request("POST", "/v1/chat/completions", json=_messages("sim-chat", 300), key=gw.key)
    assert fitting.status == 200, fitting.body


async def test_large_count_tokens_bodies_are_counted_in_the_body_process(
        gateway_server: StartGateway, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    gw = await user_and_key(await gateway_server(make_config()))
    # A model with no upstream of the message protocol: the count is the gateway's own estimate
    # (a same-format upstream would be asked for its exact figure instead).
    body = orjson.dumps(_messages("sim-chat", 40_000))
    assert len(body) > INLINE_BYTES
    expected = count_messages_body(body)[1]
    headers = {"x-api-key": gw.key, "anthropic-version": "2023-06-01", "Content-Type": "application/json"}
    reply = await gw.request("POST", "/v1/messages/count_tokens", data=io.BytesIO(body), headers=headers)
    assert reply.status == 200 and orjson.loads(reply.body) == {"input_tokens": expected}
    assert reply.headers["X-Gateway-Token-Count"] == "estimate"
    process = gw.app.state.body_work_budget.process
    assert process._process is not None and process._process.returncode is None  # it did the work
    # A body process that cannot start: the count is made here instead, the same.
    await process.aclose()
    monkeypatch.setattr("gateway.relay.body_process.sys.executable", "/nonexistent/python")
    again = await gw.request("POST", "/v1/messages/count_tokens", data=io.BytesIO(body), headers=headers)
    assert again.status == 200 and orjson.loads(again.body) == {"input_tokens": expected}
    bad = await gw.request("POST", "/v1/messages/count_tokens", data=io.BytesIO(body[:-40] + b"}"),
                          headers=headers)
    assert bad.status == 400 and orjson.loads(bad.body)["type"] == "error"
