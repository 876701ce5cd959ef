"""Regression tests for the defects of issue 16 (one test, or a small table, per defect)."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest

from tests.conftest import GatewayHandle, MakeConfig, StartGateway
from tests.hardening.conftest import raw_http, split_response, user_and_key

REQUEST_ID = "X-Service-Request-Id"


# --- 2: a percent-encoded ``key`` query parameter is a credential, and is redacted --------------

@pytest.mark.parametrize("query", ["%6Bey", "ke%79", "api%5Fkey", "key"])
async def test_encoded_key_query_is_redacted(gw: GatewayHandle, caplog: pytest.LogCaptureFixture,
                                             query: str) -> None:
    caplog.set_level(logging.INFO, logger="gateway.access")
    # Raw bytes: a client library would normalise ``%6B`` to ``k`` before sending.
    body = b'{"contents":[{"parts":[{"text":"sim:tokens=2 hi"}]}]}'
    path = f"/v1beta/models/sim-gemini:generateContent?{query}={gw.key}"
    raw = await raw_http(gw.base_url, (f"POST {path} HTTP/1.1\r\n"
                                       f"Host: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    status, _, _ = split_response(raw)
    assert status in (200, 401), raw[:500]
    await asyncio.sleep(0.05)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "/v1beta/models/sim-gemini:generateContent" in logged
    assert gw.key not in logged
    assert gw.key[4:20] not in logged


def test_redact_query_decodes_like_the_reader() -> None:
    from gateway.edge.middleware import redact_query

    assert "secret" not in redact_query("%6Bey=secret")
    assert "secret" not in redact_query("a=1&ke%79=secret&b=2")
    assert "secret" not in redact_query("api%5Fkey=secret")
    assert "secret" not in redact_query("key=sec%72et")
    assert "secret" not in redact_query("x=1;key=secret")
    assert "secret" not in redact_query("key+=secret")
    assert redact_query("alt=sse") == "alt=sse"


# --- 4: numbers beyond a double in sampling fields ---------------------------------------------

@pytest.mark.parametrize("model", ["sim-claude", "sim-chat", "sim-gemini"])
@pytest.mark.parametrize("field", ["temperature", "top_p", "top_k", "max_tokens"])
async def test_messages_huge_numbers_are_400(gw: GatewayHandle, model: str, field: str) -> None:
    body = (b'{"model":"' + model.encode() + b'","max_tokens":5,'
            b'"messages":[{"role":"user","content":"hi"}],"' + field.encode() + b'":1e400}')
    if field == "max_tokens":
        body = body.replace(b'"max_tokens":5,', b"")
    reply = await gw.request("POST", "/v1/messages", data=body, key=gw.key,
                             headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"})
    assert reply.status == 400, reply.text
    error = reply.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert field in error["error"]["message"]
    assert REQUEST_ID in reply.headers


@pytest.mark.parametrize("model", ["sim-claude", "sim-chat", "sim-gemini"])
@pytest.mark.parametrize("field", ["temperature", "top_p", "frequency_penalty", "presence_penalty"])
async def test_chat_huge_numbers_are_400(gw: GatewayHandle, model: str, field: str) -> None:
    body = (b'{"model":"' + model.encode() + b'","messages":[{"role":"user","content":"hi"}],"'
            + field.encode() + b'":1e400}')
    reply = await gw.request("POST", "/v1/chat/completions", data=body, key=gw.key,
                             headers={"Content-Type": "application/json"})
    assert reply.status == 400, reply.text
    assert field in reply.json()["error"]["message"] or reply.json()["error"].get("param") == field


@pytest.mark.parametrize("model", ["sim-claude", "sim-chat", "sim-gemini"])
@pytest.mark.parametrize("field", ["temperature", "topP", "topK"])
async def test_v1beta_huge_numbers_are_400(gw: GatewayHandle, model: str, field: str) -> None:
    body = (b'{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"' + field.encode() + b'":1e400}}')
    reply = await gw.request("POST", f"/v1beta/models/{model}:generateContent", data=body,
                             headers={"Content-Type": "application/json", "x-goog-api-key": gw.key})
    assert reply.status == 400, reply.text
    assert field in reply.json()["error"]["message"]


# --- 5: an upload the client aborts is a quiet 499 ---------------------------------------------

async def test_aborted_upload_is_a_quiet_499(gw: GatewayHandle, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    host, port = gw.base_url.removeprefix("http://").split(":")
    paths = {"/v1/messages": "application/json", "/v1/chat/completions": "application/json",
             "/v1beta/models/sim-gemini:generateContent": "application/json",
             "/v1/responses": "application/json",
             "/v1/audio/transcriptions": "multipart/form-data; boundary=b"}
    for path, content_type in paths.items():
        _, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {gw.key}\r\n"
                     f"anthropic-version: 2023-06-01\r\nContent-Type: {content_type}\r\n"
                     f"Content-Length: 100000\r\n\r\n--b\r\n".encode())
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()
    deadline = asyncio.get_running_loop().time() + 5
    while asyncio.get_running_loop().time() < deadline:
        lines = [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"
                 and "/healthz" not in r.getMessage() and "/admin" not in r.getMessage()]
        if len(lines) >= len(paths):
            break
        await asyncio.sleep(0.05)
    assert [line["status"] for line in lines] == [499] * len(paths), lines
    noisy = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not noisy, [r.getMessage() for r in noisy]


# --- 6: v1beta streaming of an aliased model shows the public id -------------------------------

@pytest.mark.parametrize("sse", [True, False])
async def test_v1beta_stream_alias_hides_upstream_model(agw: GatewayHandle, sse: bool) -> None:
    query = "?alt=sse" if sse else ""
    body = {"contents": [{"parts": [{"text": "sim:tokens=8 hi"}]}]}
    reply = await agw.request("POST", f"/v1beta/models/alias-gemini:streamGenerateContent{query}", json=body,
                              headers={"x-goog-api-key": agw.key})
    assert reply.status == 200, reply.text
    assert b"sim-gemini" not in reply.body
    if sse:
        chunks = [orjson.loads(line[6:]) for line in reply.body.split(b"\r\n") if line.startswith(b"data: ")]
    else:
        chunks = orjson.loads(reply.body)
    assert len(chunks) >= 2
    assert all(c["modelVersion"] == "alias-gemini" for c in chunks)
    text = "".join(p["text"] for c in chunks for cand in c.get("candidates", [])
                   for p in cand.get("content", {}).get("parts", []))
    assert text
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 8


# --- 7: no redirect built from the Host header ------------------------------------------------

@pytest.mark.parametrize("path", ["/admin/users/", "/v1/chat/completions/", "/v1/messages/", "/healthz/",
                                  "/v1beta/models/sim-gemini:generateContent/"])
async def test_trailing_slash_is_not_redirected(gw: GatewayHandle, path: str) -> None:
    raw = await raw_http(gw.base_url, f"POST {path} HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n"
                                      "Connection: close\r\n\r\n{}".encode())
    status, headers, body = split_response(raw)
    assert status in (404, 405), raw[:400]
    assert "location" not in headers
    assert b"evil.example" not in raw
    assert headers.get(REQUEST_ID.lower(), "").startswith("req_")
    assert "error" in orjson.loads(body)


# --- 3: request-body deadlines -----------------------------------------------------------------

async def _stalled(handle: GatewayHandle, path: str, sent: bytes, total: int,
                   drip: float | None = None) -> bytes:
    host, port = handle.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {handle.key}\r\n"
                     f"anthropic-version: 2023-06-01\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {total}\r\n\r\n".encode() + sent)
        await writer.drain()

        async def dribble() -> None:
            while drip is not None:
                await asyncio.sleep(drip)
                writer.write(b" ")
                await writer.drain()

        task = asyncio.create_task(dribble())
        try:
            return await asyncio.wait_for(reader.read(65536), 10)
        finally:
            task.cancel()
    finally:
        writer.close()


async def test_body_idle_deadline_is_408(gateway_server: StartGateway, make_config: MakeConfig) -> None:
    handle = await user_and_key(await gateway_server(make_config(
        limits={"body_idle_timeout_s": 0.5, "body_total_timeout_s": 30})))
    started = asyncio.get_running_loop().time()
    raw = await _stalled(handle, "/v1/messages", b'{"model":', 1000)
    elapsed = asyncio.get_running_loop().time() - started
    status, headers, body = split_response(raw)
    assert status == 408, raw
    assert 0.4 < elapsed < 3
    assert orjson.loads(body)["error"]["type"]  # the messages envelope
    assert orjson.loads(body)["type"] == "error"
    assert headers[REQUEST_ID.lower()].startswith("req_")
    assert headers.get("connection", "").lower() == "close"  # the rest of the body is never read


async def test_body_total_deadline_is_408(gateway_server: StartGateway, make_config: MakeConfig) -> None:
    handle = await user_and_key(await gateway_server(make_config(
        limits={"body_idle_timeout_s": 5, "body_total_timeout_s": 1})))
    started = asyncio.get_running_loop().time()
    raw = await _stalled(handle, "/v1/chat/completions", b'{"model":', 100000, drip=0.1)
    elapsed = asyncio.get_running_loop().time() - started
    status, headers, body = split_response(raw)
    assert status == 408, raw
    assert 0.9 < elapsed < 4
    assert orjson.loads(body)["error"]["code"] == "request_timeout"
    assert headers[REQUEST_ID.lower()].startswith("req_")
