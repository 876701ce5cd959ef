"""``GET /metrics``: Prometheus text (prometheus_client) fed by ``gateway_request_finished``; with
several workers, prometheus_client's multiprocess mode (plugins/metrics_workers.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from gateway.accounts.records import RequestLog
from plugins.metrics import MAX_ROUTES
from plugins.metrics_workers import MULTIPROC_ENV, Workers
from tests.metrics_text import Series, parse, series

SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? [0-9.e+-]+$')
CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello"}]}


def samples(text: str) -> dict[Series, float]:
    """(name, labels) -> value, checking every line is valid exposition format."""
    for line in text.splitlines():
        if line.startswith("# "):
            assert line.startswith(("# HELP ", "# TYPE ")), line
            continue
        assert SAMPLE.match(line), line
    return parse(text)


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
    ok = {"route": "/v1/chat/completions", "model": "sim-chat"}
    assert found[series("gateway_requests_total", **ok, status="200", outcome="success")] == 2
    assert found[series("gateway_request_duration_seconds_count", **ok)] == 2
    assert found[series("gateway_request_duration_seconds_bucket", **ok, le="+Inf")] == 2
    assert found[series("gateway_request_duration_seconds_bucket", **ok, le="120.0")] == 2
    assert found[series("gateway_tokens_total", model="sim-chat", kind="completion")] > 0
    assert found[series("gateway_upstream_errors_total", upstream="broken", outcome="upstream_error")] == 1
    assert found[series("gateway_soft_limit_reached_total", scope="user")] == 0  # present from the start
    assert not any(name.endswith("_created") for name, _ in found)  # not in the exposition
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
    text = (await gw.request("GET", "/metrics")).text
    assert 'route="/odd\\"path\\\\"' in text
    found = samples(text)
    failed = {"status": "400", "outcome": "client_error"}
    # unknown models share one label; the odd path is escaped in the text and read back whole
    assert found[series("gateway_requests_total", route='/odd"path\\', model="other", **failed)] == 2
    gemini = series("gateway_requests_total", route="/v1beta/models/{model}:generateContent",
                    model="sim-gemini", **failed)
    assert found[gemini] == 1
    routes = {dict(labels)["route"] for name, labels in found if name == "gateway_requests_total"}
    assert len(routes) == MAX_ROUTES + 1  # the bound, plus "other" for the rest


# A worker of ``gateway serve --workers N``: prometheus_client in multiprocess mode (the variable is
# read when it is imported), one metered call, its own upstream health; it stays until its stdin closes.
WORKER = textwrap.dedent("""
    import sys, time
    from gateway.accounts.records import RequestLog
    from plugins.metrics import Metrics

    class Catalogue:
        def label(self, model): return model

    metrics = Metrics(Catalogue())
    metrics.observe(RequestLog(request_id="req_1", created_at=time.time(), user_id=1, key_id=1,
                               token_name="t", route="/v1/chat/completions", family="chat",
                               model="sim-chat", status=200, outcome="success", use_time_ms=30))
    metrics.operator.in_flight.show({(): 1})
    metrics.operator.cooling_down.show({("sim-openai",): 1})
    print("ready", flush=True)
    sys.stdin.read()
""")


def test_workers_share_one_exposition_and_dead_workers_leave_their_gauges(tmp_path: Path) -> None:
    env = {MULTIPROC_ENV: str(tmp_path), "PATH": "/usr/bin:/bin"}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, text=True, cwd=Path(__file__).parents[2]) for _ in range(2)]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
        share = Workers(tmp_path, update=lambda: None)
        found = samples(share.exposition().decode())
        ok = {"route": "/v1/chat/completions", "model": "sim-chat"}
        assert found[series("gateway_requests_total", **ok, status="200", outcome="success")] == 2
        assert found[series("gateway_request_duration_seconds_bucket", **ok, le="0.05")] == 2
        assert found[series("gateway_requests_in_flight")] == 2  # summed over the live workers
        cooling = {dict(labels)["pid"] for name, labels in found if name == "gateway_upstream_cooling_down"}
        assert cooling == {str(w.pid) for w in workers}  # each worker's own, labelled with its pid

        gone = workers.pop()
        gone.communicate("")  # it exits without marking itself dead, as a crashed worker would
        found = samples(share.exposition().decode())
        assert found[series("gateway_requests_total", **ok, status="200", outcome="success")] == 2  # kept
        assert found[series("gateway_requests_in_flight")] == 1
        cooling = {dict(labels)["pid"] for name, labels in found if name == "gateway_upstream_cooling_down"}
        assert cooling == {str(workers[0].pid)}
    finally:
        for worker in workers:
            worker.communicate("")
