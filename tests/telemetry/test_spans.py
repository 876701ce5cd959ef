"""OpenTelemetry traces through HTTP with each family's official SDK (issue 36 point 5, CONTRACT 7):
one SERVER span per call with the GenAI attributes and ``gateway.request_id``, a CLIENT span per
upstream attempt under it, a client's ``traceparent`` continued and each attempt's passed upstream,
as a local OTLP/HTTP collector receives them."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

from plugins.cache import cache_of

from .conftest import (
    CLIENT,
    SERVER,
    STATUS_ERROR,
    Collector,
    call_span,
    nonce,
    sent_ids,
    telemetry_models,
    telemetry_upstreams,
    traceparent,
    upstream_headers,
)

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle

# google-genai subclasses aiohttp's ClientSession, which aiohttp warns about.
pytestmark = pytest.mark.filterwarnings("ignore:Inheritance class:DeprecationWarning")


def _openai(gw: GatewayHandle, headers: dict[str, str] | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=gw.key, max_retries=0, default_headers=headers
    )


async def _log_row(gw: GatewayHandle, request_id: str) -> dict[str, Any]:
    await gw.gateway.meter.flush()
    reply = await gw.admin("GET", f"/admin/logs?request_id={request_id}")
    assert reply.status == 200, reply.text
    rows = [r for r in reply.json()["data"] if r["request_id"] == request_id]
    assert len(rows) == 1
    return rows[0]


async def test_chat_call_span_and_attempt(
    traced_gw: GatewayHandle, collector: Collector, simulator: Any
) -> None:
    prompt = nonce()
    raw = await _openai(traced_gw).chat.completions.with_raw_response.create(
        model="t-chat", messages=[{"role": "user", "content": prompt}]
    )
    reply = raw.parse()
    rid = raw.headers["x-service-request-id"]
    span = await call_span(traced_gw, collector, rid)
    assert span.name == "chat t-chat" and span.kind == SERVER and span.parent_span_id == ""
    assert span.resource["service.name"] == "gw-under-test"
    assert span.resource["service.instance.id"] == traced_gw.gateway.instance_id
    attrs = span.attributes
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "t-chat"
    assert reply.usage is not None
    assert attrs["gen_ai.usage.input_tokens"] == reply.usage.prompt_tokens
    assert attrs["gen_ai.usage.output_tokens"] == reply.usage.completion_tokens == 5
    assert attrs["gen_ai.system"] == "openai"
    assert attrs["http.response.status_code"] == 200 and attrs["gateway.outcome"] == "success"
    row = await _log_row(traced_gw, rid)  # the span's request id is the request log's
    assert (row["model"], row["completion_tokens"], row["upstream"]) == ("t-chat", 5, "t-up")
    assert span.status_code != STATUS_ERROR
    [attempt] = collector.children(span)
    assert attempt.kind == CLIENT and attempt.name == "chat sim-chat"
    assert attempt.attributes["gateway.upstream"] == "t-up"
    assert attempt.attributes["gateway.attempt"] == 1 and "gateway.retry" not in attempt.attributes
    assert attempt.attributes["gen_ai.system"] == "openai"
    assert attempt.attributes["http.response.status_code"] == 200
    assert attempt.attributes["server.address"] == "127.0.0.1"
    assert span.start_ns <= attempt.start_ns <= attempt.end_ns <= span.end_ns
    # The upstream was handed the attempt's own place in the trace.
    [sent] = await upstream_headers(simulator.base_url, prompt)
    assert sent_ids(sent["traceparent"]) == (span.trace_id, attempt.span_id, True)


async def test_client_traceparent_is_continued(
    traced_gw: GatewayHandle, collector: Collector, simulator: Any
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    headers = {"traceparent": traceparent(trace_id, parent_id), "tracestate": "vendor=abc"}
    prompt = nonce()
    raw = await _openai(traced_gw, headers).chat.completions.with_raw_response.create(
        model="t-chat", messages=[{"role": "user", "content": prompt}]
    )
    span = await call_span(traced_gw, collector, raw.headers["x-service-request-id"])
    assert span.trace_id == trace_id and span.parent_span_id == parent_id
    [attempt] = collector.children(span)
    [sent] = await upstream_headers(simulator.base_url, prompt)
    assert sent_ids(sent["traceparent"]) == (trace_id, attempt.span_id, True)
    assert sent["tracestate"] == "vendor=abc"


async def test_failover_is_one_span_per_attempt(
    traced_gw: GatewayHandle, collector: Collector, simulator: Any
) -> None:
    prompt = nonce()
    raw = await _openai(traced_gw).chat.completions.with_raw_response.create(
        model="t-flaky", messages=[{"role": "user", "content": prompt}]
    )
    span = await call_span(traced_gw, collector, raw.headers["x-service-request-id"])
    failed, answered = collector.children(span)
    assert failed.attributes["gateway.upstream"] == "t-broken" and failed.status_code == STATUS_ERROR
    assert failed.attributes["http.response.status_code"] == 503
    assert "gateway.retry" not in failed.attributes
    assert answered.attributes["gateway.upstream"] == "t-up" and answered.status_code != STATUS_ERROR
    assert answered.attributes["gateway.attempt"] == 2 and answered.attributes["gateway.retry"] is True
    # Each attempt passed its own span upstream.
    sent = await upstream_headers(simulator.base_url, prompt)
    assert [sent_ids(h["traceparent"]) for h in sent] == [
        (span.trace_id, s.span_id, True) for s in (failed, answered)
    ]


async def test_fallback_names_both_models(traced_gw: GatewayHandle, collector: Collector) -> None:
    raw = await _openai(traced_gw).chat.completions.with_raw_response.create(
        model="t-down", messages=[{"role": "user", "content": nonce()}]
    )
    assert raw.headers["x-gateway-fallback"] == "t-chat"
    span = await call_span(traced_gw, collector, raw.headers["x-service-request-id"])
    assert span.name == "chat t-down"
    assert span.attributes["gen_ai.request.model"] == "t-down"
    assert span.attributes["gen_ai.response.model"] == "t-chat"
    assert span.attributes["gateway.fallback_from"] == "t-down"
    # t-down's one upstream tried twice (routing.max_attempts), then the fallback's: numbered on.
    attempts = collector.children(span)
    assert [(a.attributes["gateway.upstream"], a.attributes["gateway.attempt"]) for a in attempts] == [
        ("t-broken", 1),
        ("t-broken", 2),
        ("t-up", 3),
    ]


async def test_failed_call_is_an_error_span(traced_gw: GatewayHandle, collector: Collector) -> None:
    with pytest.raises(openai.APIStatusError) as failed:
        await _openai(traced_gw).chat.completions.create(
            model="t-dead", messages=[{"role": "user", "content": nonce()}]
        )
    assert failed.value.status_code == 502
    span = await call_span(traced_gw, collector, failed.value.response.headers["x-service-request-id"])
    assert span.status_code == STATUS_ERROR
    assert span.attributes["http.response.status_code"] == 502
    assert span.attributes["gateway.outcome"] == "upstream_error"
    assert span.attributes["error.type"] == failed.value.response.json()["error"]["code"]
    assert span.attributes["gen_ai.usage.output_tokens"] == 0
    assert all(a.status_code == STATUS_ERROR for a in collector.children(span))


async def test_anthropic_stream_span(traced_gw: GatewayHandle, collector: Collector) -> None:
    client = anthropic.AsyncAnthropic(base_url=traced_gw.base_url, api_key=traced_gw.key, max_retries=0)
    raw = await client.messages.with_raw_response.create(
        model="sim-claude", max_tokens=64, messages=[{"role": "user", "content": nonce()}], stream=True
    )
    events = [event async for event in await raw.parse()]
    output = [e.usage.output_tokens for e in events if e.type == "message_delta"][-1]
    span = await call_span(traced_gw, collector, raw.headers["x-service-request-id"])
    assert span.name == "chat sim-claude" and span.attributes["gen_ai.system"] == "anthropic"
    assert span.attributes["gen_ai.usage.output_tokens"] == output == 5
    [attempt] = collector.children(span)
    # The answered attempt lasts until the stream was relayed whole.
    assert attempt.end_ns <= span.end_ns and attempt.end_ns > attempt.start_ns


async def test_gemini_spans_whole_and_streamed(traced_gw: GatewayHandle, collector: Collector) -> None:
    client = genai.Client(
        api_key=traced_gw.key,
        http_options=types.HttpOptions(base_url=traced_gw.base_url, api_version="v1beta"),
    )
    try:
        reply = await client.aio.models.generate_content(model="sim-gemini", contents=nonce())
        assert reply.sdk_http_response is not None and reply.sdk_http_response.headers is not None
        rid = reply.sdk_http_response.headers["x-service-request-id"]
        chunks = [
            c
            async for c in await client.aio.models.generate_content_stream(
                model="sim-gemini", contents=nonce()
            )
        ]
        assert chunks
    finally:
        await client.aio.aclose()
    span = await call_span(traced_gw, collector, rid)
    assert span.name == "generate_content sim-gemini"
    assert span.attributes["gen_ai.operation.name"] == "generate_content"
    assert span.attributes["gen_ai.system"] == "gemini"
    assert reply.usage_metadata is not None
    assert span.attributes["gen_ai.usage.output_tokens"] == reply.usage_metadata.candidates_token_count
    # The stream's span, ended once its relay finished.
    first = chunks[0].sdk_http_response
    assert first is not None and first.headers is not None
    streamed = await call_span(traced_gw, collector, first.headers["x-service-request-id"])
    assert streamed.name == "generate_content sim-gemini"
    assert streamed.attributes["gen_ai.usage.output_tokens"] == 5


async def test_embeddings_operation(traced_gw: GatewayHandle, collector: Collector) -> None:
    raw = await _openai(traced_gw).embeddings.with_raw_response.create(model="sim-embed", input="hello")
    span = await call_span(traced_gw, collector, raw.headers["x-service-request-id"])
    assert span.name == "embeddings sim-embed"
    assert span.attributes["gen_ai.usage.input_tokens"] == raw.parse().usage.prompt_tokens


async def test_a_cache_hit_is_a_call_without_attempts(
    gateway_server: Any, make_config: Any, simulator: Any, collector: Collector
) -> None:
    config = make_config(
        extra_models=telemetry_models(),
        extra_upstreams=telemetry_upstreams(simulator.base_url),
        telemetry={"otlp_endpoint": collector.base_url},
        cache={"enabled": True, "ttl_s": 60},
    )
    gw = await gateway_server(config)
    user = await gw.create_user()
    client = openai.AsyncOpenAI(
        base_url=gw.base_url + "/v1", api_key=(await gw.create_key(user["id"]))["key"], max_retries=0
    )
    ask = [{"role": "user", "content": nonce()}]
    await client.chat.completions.create(model="t-chat", messages=ask)  # type: ignore[arg-type]
    await cache_of(gw.gateway).drained()  # type: ignore[union-attr]
    raw = await client.chat.completions.with_raw_response.create(model="t-chat", messages=ask)  # type: ignore[arg-type]
    assert raw.headers["x-gateway-cache"] == "hit"
    span = await call_span(gw, collector, raw.headers["x-service-request-id"])
    assert span.attributes["gateway.outcome"] == "cache_hit" and collector.children(span) == []
    assert span.attributes["gen_ai.usage.output_tokens"] == 5
