"""Point 5 of issue 15: the access log line carries the call (model, key, user, upstream, attempts,
tokens, cost, outcome); every upstream failure is a warning naming the upstream and the request;
/metrics counts every request (refusals too), spend, in-flight, time to first token and upstream
health; a quota refusal names the limit and what it still allows."""

from __future__ import annotations

import logging
import re
import socket
from typing import Any

import orjson
import pytest

from tests.metrics_text import value

CHAT = {"model": "sim-chat", "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [orjson.loads(r.getMessage()) for r in caplog.records if r.name == "gateway.access"]


def upstream_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "gateway.upstream" and r.levelno == logging.WARNING]


async def test_access_log_line_carries_the_call(gw: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    reply = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=gw.key)
    assert reply.status == 200, reply.text
    rid = reply.headers["X-Service-Request-Id"]
    await gw.gateway.meter.flush()
    line = next(line for line in access_lines(caplog) if line["request_id"] == rid)
    row = (await gw.admin("GET", f"/admin/logs?key_id={gw.key_record['id']}")).json()["data"][0]
    usage = reply.json()["usage"]
    assert line["status"] == 200 and line["path"] == "/v1/chat/completions"
    assert line["model"] == "sim-chat" and line["upstream"] == "sim-openai" and line["attempts"] == 1
    assert line["key_id"] == gw.key_record["id"] and line["user_id"] == gw.user["id"]
    assert (line["prompt_tokens"], line["completion_tokens"]) == (usage["prompt_tokens"],
                                                                  usage["completion_tokens"])
    assert line["outcome"] == "success" and line["cost_usd"] > 0
    assert row["request_id"] == rid
    # a refusal made no call: its line names the error code, and no key or model (none was valid)
    refused = await gw.request("POST", "/v1/chat/completions", json=CHAT, key="sk-" + "x" * 40)
    line = next(x for x in access_lines(caplog) if x["request_id"] == refused.headers["X-Service-Request-Id"])
    assert line["status"] == 401 and line["error_code"] == "invalid_api_key"
    assert line["model"] is None and line["key_name"] is None and line["outcome"] == "client_error"


@pytest.mark.parametrize(("upstream", "stream", "reason"), [
    ({"api_key": "sk-sim-fail503"}, False, "answered HTTP 503"),
    ({"api_key": "sk-sim-fail429"}, False, "answered HTTP 429"),
    ({"base_url": f"http://127.0.0.1:{closed_port()}"}, False, "failed before the first byte"),
    ({"api_key": "sk-sim-hang", "timeouts": {"first_byte_s": 0.3}}, False, "timed out before the first byte"),
])
async def test_every_upstream_failure_is_a_warning(gateway_server: Any, make_config: Any, simulator: Any,
                                                   caplog: pytest.LogCaptureFixture, upstream: dict[str, Any],
                                                   stream: bool, reason: str) -> None:
    bad = {"name": "sim-bad", "protocol": "chat", "base_url": simulator.base_url, "api_key": "sk-sim",
           "models": ["sim-chat"], "priority": -1, **upstream}
    gw = await gateway_server(make_config(extra_upstreams=[bad]))
    user = await gw.create_user()
    key = (await gw.create_key(user["id"]))["key"]
    caplog.set_level(logging.INFO)
    reply = await gw.request("POST", "/v1/chat/completions", json={**CHAT, "stream": stream}, key=key)
    assert reply.status == 200, reply.text  # failed over to sim-openai
    rid = reply.headers["X-Service-Request-Id"]
    warnings = upstream_warnings(caplog)
    assert any(w.startswith(f"upstream sim-bad failed: {reason}") and w.endswith(f"(request {rid})")
               for w in warnings), warnings
    await gw.gateway.meter.flush()
    line = next(x for x in access_lines(caplog) if x["request_id"] == rid)
    assert line["attempts"] == 2 and line["upstream"] == "sim-openai"
    metrics = (await gw.request("GET", "/metrics")).text
    assert 'gateway_upstream_cooling_down{upstream="sim-bad"} 1' in metrics
    assert 'gateway_upstream_cooling_down{upstream="sim-openai"} 0' in metrics
    assert 'gateway_upstream_failures_total{upstream="sim-bad"} 1' in metrics
    assert 'gateway_upstream_cooldowns_total{upstream="sim-bad"} 1' in metrics
    assert 'gateway_upstream_error_ratio{upstream="sim-bad"} 1.0' in metrics


async def test_a_cut_stream_is_a_warning(gateway_server: Any, make_config: Any, simulator: Any,
                                         caplog: pytest.LogCaptureFixture) -> None:
    cut = {"name": "sim-cut", "protocol": "chat", "base_url": simulator.base_url, "api_key": "sk-sim-cut2",
           "models": ["sim-chat"], "priority": -1}
    gw = await gateway_server(make_config(extra_upstreams=[cut]))
    user = await gw.create_user()
    key = (await gw.create_key(user["id"]))["key"]
    caplog.set_level(logging.INFO)
    body = {**CHAT, "max_tokens": 50, "stream": True,
            "messages": [{"role": "user", "content": "sim:tokens=40"}]}
    reply = await gw.request("POST", "/v1/chat/completions", json=body, key=key)
    rid = reply.headers["X-Service-Request-Id"]
    assert any(w.startswith("upstream sim-cut failed:") and w.endswith(f"(request {rid})")
               for w in upstream_warnings(caplog)), upstream_warnings(caplog)
    await gw.gateway.meter.flush()
    line = next(x for x in access_lines(caplog) if x["request_id"] == rid)
    assert line["outcome"] == "upstream_cut" and line["upstream"] == "sim-cut"


def sample(metrics: str, name: str, **labels: str) -> float:
    return value(metrics, name, **labels)


async def test_metrics_count_every_request_spend_in_flight_and_ttft(gw: Any) -> None:
    assert (await gw.request("GET", "/v1/models", key="sk-" + "y" * 40)).status == 401
    assert (await gw.request("GET", "/no/such/path")).status == 404
    assert (await gw.request("GET", "/v1/models/unknown-model", key=gw.key)).status == 404
    first = await gw.request("POST", "/v1/chat/completions", json=CHAT, key=gw.key)
    streamed = await gw.request("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, key=gw.key)
    assert first.status == streamed.status == 200
    await gw.gateway.meter.flush()
    metrics = (await gw.request("GET", "/metrics")).text
    assert sample(metrics, "gateway_http_requests_total", method="GET", route="/v1/models", status="401") == 1
    assert sample(metrics, "gateway_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert sample(metrics, "gateway_http_requests_total", method="POST", route="/v1/chat/completions",
                  status="200") == 2
    by_model = r'gateway_http_requests_total\{method="GET",route="/v1/models/[^"]+",status="404"\} 1'
    assert re.search(by_model, metrics), metrics
    assert sample(metrics, "gateway_requests_in_flight") == 1  # this scrape
    rows = (await gw.admin("GET", f"/admin/logs?key_id={gw.key_record['id']}")).json()["data"]
    spent = sum(row["charge_nano"] for row in rows)
    # the two calls, and the key's refused model lookup (CONTRACT 6a)
    assert sorted((row["status"], row["error_code"]) for row in rows) == [
        (200, None), (200, None), (404, "model_not_found")] and spent > 0
    assert sample(metrics, "gateway_spend_usd_total", model="sim-chat", group="default") == pytest.approx(
        spent / 1e9, abs=1e-9)
    assert sample(metrics, "gateway_time_to_first_token_seconds_count", model="sim-chat") == 1
    assert sample(metrics, "gateway_time_to_first_token_seconds_bucket", model="sim-chat", le="+Inf") == 1


async def test_quota_refusal_names_the_limit_and_what_is_left(gw: Any) -> None:
    big = {**CHAT, "max_tokens": 100_000}
    capped = await gw.create_key(gw.user["id"], quota_usd=0.01)
    reply = await gw.request("POST", "/v1/chat/completions", json=big, key=capped["key"])
    assert reply.status == 403
    message = reply.json()["error"]["message"]
    assert "API key's spending ceiling (quota_usd $0.010000) allows only $0.010000 more" in message, message
    poor = await gw.create_user(quota_usd=0.02)
    poor_key = await gw.create_key(poor["id"])
    reply = await gw.request("POST", "/v1/chat/completions", json=big, key=poor_key["key"])
    assert reply.status == 403
    message = reply.json()["error"]["message"]
    assert "the account balance allows only $0.020000" in message, message
    assert re.match(r"Insufficient quota: this request may cost up to \$0\.15\d+, but ", message), message
