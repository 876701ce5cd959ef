"""Issue 34 point 3, CONTRACT 6a: every refused call writes a request-log row with its status and
error code, found by ``GET /admin/logs?status=N`` (user and key null where no valid key was given,
named when one was), whatever the family; its access-log line names the code, the key's name, the
model, the stream flag and the time to first byte; a flood of refusals is bounded in memory."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors, types

from gateway.accounts.metering.writer import BatchWriter
from gateway.storage.base import Storage
from gateway.storage.rows import LogFilter
from tests.ops.test_observability import access_lines

pytestmark = [pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")]  # google-genai
PROMPT: Any = [{"role": "user", "content": "hello"}]
BAD_KEY = "sk-" + "z" * 40


async def _rows(gw: Any, status: int) -> list[dict[str, Any]]:
    reply = await gw.admin("GET", f"/admin/logs?status={status}&page_size=200")
    assert reply.status == 200, reply.text
    return list(reply.json()["data"])


def _row_of(rows: list[dict[str, Any]], request_id: str) -> dict[str, Any]:
    return next(row for row in rows if row["request_id"] == request_id)


async def _logged_row(gw: Any, status: int, request_id: str) -> dict[str, Any]:
    """The row, once written: a refusal is queued when its request ends on the server, which may
    be a moment after the client read the answer (a refused upload is drained first)."""
    for _ in range(200):
        rows = [row for row in await _rows(gw, status) if row["request_id"] == request_id]
        if rows:
            return rows[0]
        await asyncio.sleep(0.025)
    raise AssertionError(f"no {status} row for {request_id}")


async def _access_line(caplog: pytest.LogCaptureFixture, request_id: str) -> dict[str, Any]:
    for _ in range(200):
        lines = [x for x in access_lines(caplog) if x["request_id"] == request_id]
        if lines:
            return lines[0]
        await asyncio.sleep(0.025)
    raise AssertionError(f"no access-log line for {request_id}")


async def test_each_family_refusal_is_logged_with_its_code(gw: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    base = gw.base_url
    async with openai.AsyncOpenAI(base_url=base + "/v1", api_key=BAD_KEY, max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as chat_401:
            await client.chat.completions.create(model="sim-chat", messages=PROMPT)
    async with openai.AsyncOpenAI(base_url=base + "/v1", api_key=gw.key, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as chat_404:
            await client.chat.completions.create(model="no-such-model", messages=PROMPT)
        with pytest.raises(openai.BadRequestError) as chat_400:
            await client.chat.completions.create(model="sim-chat", messages=[], stream=True)
    async with anthropic.AsyncAnthropic(base_url=base, api_key=BAD_KEY, max_retries=0) as client:
        with pytest.raises(anthropic.AuthenticationError) as messages_401:
            await client.messages.create(model="sim-claude", max_tokens=5, messages=PROMPT)
    sdk = genai.Client(api_key=gw.key, http_options=types.HttpOptions(base_url=base, api_version="v1beta"))
    try:
        with pytest.raises(errors.ClientError) as gemini_404:
            await sdk.aio.models.generate_content(model="no-such-gemini", contents="hi")
    finally:
        await sdk.aio.aclose()
    assert gemini_404.value.code == 404
    unknown_path = await gw.request("GET", "/v1/no/such/thing", key=gw.key)
    assert unknown_path.status == 404

    refusals = (("chat_401", chat_401), ("chat_404", chat_404), ("chat_400", chat_400),
                ("messages_401", messages_401))
    ids = {name: err.value.response.headers["x-service-request-id"] for name, err in refusals}
    key_id, user_id = gw.key_record["id"], gw.user["id"]
    unauthorised = await _rows(gw, 401)
    for name in ("chat_401", "messages_401"):
        row = _row_of(unauthorised, ids[name])
        assert row["error_code"] == "invalid_api_key" and row["outcome"] == "client_error"
        assert row["user_id"] is None and row["key_id"] is None and row["ip"] == "127.0.0.1"
    assert _row_of(unauthorised, ids["messages_401"])["route"] == "/v1/messages"
    missing = await _rows(gw, 404)
    row = _row_of(missing, ids["chat_404"])
    assert (row["error_code"], row["model"], row["key_id"], row["user_id"], row["token_name"]) == (
        "model_not_found", "no-such-model", key_id, user_id, "test")
    gemini = next(r for r in missing if r["model"] == "no-such-gemini")
    assert gemini["family"] == "v1beta" and gemini["error_code"] == "model_not_found"
    path_row = _row_of(missing, unknown_path.headers["X-Service-Request-Id"])
    assert path_row["error_code"] == "not_found" and path_row["route"] == "/v1/no/such/thing"
    bad = _row_of(await _rows(gw, 400), ids["chat_400"])
    assert bad["error_code"] == "invalid_request" and bad["key_id"] == key_id

    # The access-log line of a refusal names the same code, the key's name and the model.
    line = await _access_line(caplog, ids["chat_404"])
    assert (line["status"], line["error_code"], line["key_name"], line["model"], line["stream"]) == (
        404, "model_not_found", "test", "no-such-model", False)
    assert "first_byte_ms" in line


async def test_a_body_over_the_limit_is_logged(gateway_server: Any, make_config: Any) -> None:
    gw = await gateway_server(make_config(limits={"json_body_bytes": 2000}))
    user = await gw.create_user("u", quota_usd=1)
    key = await gw.create_key(user["id"], name="big")
    body = b'{"model": "sim-chat", "messages": [' + b" " * 3000 + b"]}"
    too_large = await gw.request("POST", "/v1/chat/completions", key=key["key"], data=body,
                                 headers={"content-type": "application/json"})
    assert too_large.status == 413
    large = await _logged_row(gw, 413, too_large.headers["X-Service-Request-Id"])
    assert large["error_code"] == "request_too_large" and large["route"] == "/v1/chat/completions"


async def test_quota_and_rate_refusals_are_logged(gw: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    limited = await gw.create_key(gw.user["id"], name="limited", rpm=1)
    broke = await gw.create_key(gw.user["id"], name="broke", quota_usd=0)
    base = gw.base_url + "/v1"
    async with openai.AsyncOpenAI(base_url=base, api_key=limited["key"], max_retries=0) as client:
        await client.chat.completions.create(model="sim-chat", max_tokens=5, messages=PROMPT)
        with pytest.raises(openai.RateLimitError) as too_many:
            await client.chat.completions.create(model="sim-chat", max_tokens=5, messages=PROMPT)
    async with openai.AsyncOpenAI(base_url=base, api_key=broke["key"], max_retries=0) as client:
        with pytest.raises(openai.PermissionDeniedError) as no_quota:
            await client.chat.completions.create(model="sim-chat", max_tokens=5, messages=PROMPT)
    rate_row = _row_of(await _rows(gw, 429), too_many.value.response.headers["x-service-request-id"])
    assert (rate_row["error_code"], rate_row["key_id"], rate_row["token_name"]) == (
        "rate_limit_exceeded", limited["id"], "limited")
    quota_row = _row_of(await _rows(gw, 403), no_quota.value.response.headers["x-service-request-id"])
    assert (quota_row["error_code"], quota_row["key_id"], quota_row["charge_nano"]) == (
        "insufficient_quota", broke["id"], 0)
    body = {"model": "sim-chat", "max_tokens": 5, "stream": True, "messages": PROMPT}
    streamed = await gw.request("POST", "/v1/chat/completions", key=gw.key, json=body)
    assert streamed.status == 200
    await gw.gateway.meter.flush()
    rid = streamed.headers["X-Service-Request-Id"]
    line = await _access_line(caplog, rid)
    assert line["stream"] is True and line["first_byte_ms"] is not None and line["key_name"] == "test"
    assert line["error_code"] is None and line["model"] == "sim-chat"


async def test_a_flood_of_refusals_is_bounded_and_counted(gateway_server: Any, make_config: Any) -> None:
    gw = await gateway_server(make_config(logs={"refusal_queue_max": 5}))
    writer: BatchWriter = gw.gateway.meter._writer
    stuck = asyncio.Event()
    real_settle = writer._settle

    async def held(batch: list[Any]) -> None:  # the database is slow: nothing commits meanwhile
        await stuck.wait()
        await real_settle(batch)

    writer._settle = held  # type: ignore[method-assign]
    replies = await asyncio.gather(*(gw.request("GET", "/v1/models", key=BAD_KEY) for _ in range(40)))
    assert {r.status for r in replies} == {401}
    assert writer.pending <= 2 * 5  # one batch in the hands of the database, the queue full behind it
    assert gw.gateway.meter.refusals_dropped >= 40 - 2 * 5
    stuck.set()
    await gw.gateway.meter.flush()
    written = (await gw.admin("GET", "/admin/logs?status=401&page_size=200")).json()
    assert written["total"] == 40 - gw.gateway.meter.refusals_dropped
    metrics = (await gw.request("GET", "/metrics")).text
    assert f"gateway_refusal_logs_dropped_total {float(gw.gateway.meter.refusals_dropped)}" in metrics


async def test_refusal_rows_do_not_hold_back_settlements(gw: Any) -> None:
    """A batch takes refusals beside settlements, never instead of them."""
    storage: Storage = gw.gateway.storage
    for _ in range(30):
        await gw.request("GET", "/v1/models", key=BAD_KEY)
    ok = await gw.request("POST", "/v1/chat/completions", key=gw.key,
                          json={"model": "sim-chat", "max_tokens": 5, "messages": PROMPT})
    assert ok.status == 200
    await gw.gateway.meter.flush()
    page = await storage.query_logs(LogFilter(key_id=gw.key_record["id"], status=200), 1, 10)
    assert page.total == 1 and page.items[0].request_id == ok.headers["X-Service-Request-Id"]
