"""``GET /metrics``: Prometheus text fed by ``gateway_request_finished``."""

from __future__ import annotations

import re
import time
from typing import Any

from gateway.accounts.records import RequestLog
from plugins.metrics import MAX_ROUTES

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? [0-9.e+-]+$')
CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello"}]}


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, checking every line is valid exposition format."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("# "):
            assert line.startswith(("# HELP ", "# TYPE ")), line
            continue
        assert SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        found[name] = float(value)
    return found


async def test_metrics_count_real_calls(gateway_server: Any, make_config: Any) -> None:
    # An upstream whose credential makes the simulator answer 503 to everything.
    broken = {"name": "broken", "protocol": "chat", "base_url": make_config().upstreams[0].base_url,
              "api_key": "sk-sim-fail503", "models": ["sim-broken"]}
    config = make_config(
        extra_models=[{"id": "sim-broken", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}],
        extra_upstreams=[broken])
    gw = await gateway_server(config)
    user = await gw.create_user()
    key = (await gw.create_key(user["id"]))["key"]
    for _ in range(2):
        assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key)).status == 200
    failed = await gw.request("POST", "/v1/chat/completions", json={**CHAT, "model": "sim-broken"}, key=key)
    assert failed.status == 502

    reply = await gw.request("GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(reply.text)
    ok = 'route="/v1/chat/completions",model="sim-chat"'
    assert found[f'gateway_requests_total{{{ok},status="200",outcome="success"}}'] == 2
    assert found[f'gateway_request_duration_seconds_count{{{ok}}}'] == 2
    assert found[f'gateway_request_duration_seconds_bucket{{{ok},le="+Inf"}}'] == 2
    assert found['gateway_tokens_total{model="sim-chat",kind="completion"}'] > 0
    assert found['gateway_upstream_errors_total{upstream="broken",outcome="upstream_error"}'] == 1
    assert key not in reply.text


async def test_metrics_labels_are_bounded_and_escaped(gw: Any) -> None:
    def log(model: str, route: str) -> RequestLog:
        return RequestLog(request_id="req_" + "0" * 32, created_at=time.time(), user_id=gw.user["id"],
                          key_id=gw.key_record["id"], token_name="test", route=route, family="chat",
                          model=model, status=400, outcome="client_error", use_time_ms=3)

    gw.gateway.meter.finish(log("made-up-model-1", '/odd"path\\'), None, 0)
    gw.gateway.meter.finish(log("made-up-model-2", '/odd"path\\'), None, 0)
    gw.gateway.meter.finish(log("sim-gemini", "/v1beta/models/sim-gemini:generateContent"), None, 0)
    for i in range(MAX_ROUTES + 5):
        gw.gateway.meter.finish(log("sim-chat", f"/videoa/v1/tasks/task-{i}"), None, 0)
    found = samples((await gw.request("GET", "/metrics")).text)
    labels = 'route="/odd\\"path\\\\",model="other",status="400",outcome="client_error"'
    assert found[f"gateway_requests_total{{{labels}}}"] == 2  # unknown models share one label
    labels = 'route="/v1beta/models/{model}:generateContent",model="sim-gemini"'
    assert found[f'gateway_requests_total{{{labels},status="400",outcome="client_error"}}'] == 1
    routes = {k.split('route="')[1].split('"')[0] for k in found if k.startswith("gateway_requests_total")}
    assert len(routes) == MAX_ROUTES + 1  # the bound, plus "other" for the rest
