"""``python -m bench.telemetry_cost [ROUNDS] [SECONDS] [SAMPLE_RATIO]``: the CPU per call that
OpenTelemetry traces add (``plugins.telemetry``), at concurrency 16.

Two ``gateway serve`` processes (one worker each, the default server) on the bench's config and
upstream (``procs.start_upstream``: the simulator behind the replaying front): one with telemetry
off, one exporting the sampled calls' spans (``sample_ratio``, 1 by default) to a local OTLP/HTTP collector (a
process of this module that decodes each export and counts its spans). Same-format chat, whole and
streamed, loaded with wrk at 16 connections, the two gateways measured in turn round after round
(``measure.interleaved``: medians, after an untimed warm-up); CPU per call from /proc of each
gateway's process tree, the SDK's export thread included. The collector's count is checked
against the calls made: traces that were dropped would make the figure look cheaper than it is.

``python -m bench.telemetry_cost hooks RATIO...``: the plugin's own CPU per call in this process
(``hooks``), split into the call hooks (the event loop's share) and the export (the SDK's thread).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NamedTuple

import aiohttp
from aiohttp import web
from starlette.datastructures import Headers

from bench import measure, procs, wrk
from bench.measure import Target
from bench.scenarios import all_scenarios
from gateway.api import hookimpl

if TYPE_CHECKING:  # imported when used: the whole-gateway runs need no OpenTelemetry here
    from gateway.accounts.records import RequestLog
    from plugins.telemetry.spans import CallTracer

ADMIN_KEY = "bench-admin-key"
CONNECTIONS = 16
SCENARIOS = ("chat", "chat stream")


def _collector(port: int) -> None:
    """The OTLP/HTTP collector: spans decoded and counted (``GET /count``)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    received = {"spans": 0}
    answer = ExportTraceServiceResponse().SerializeToString()

    async def export(request: web.Request) -> web.Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.read())
        received["spans"] += sum(len(s.spans) for r in message.resource_spans for s in r.scope_spans)
        return web.Response(body=answer, content_type="application/x-protobuf")

    async def count(request: web.Request) -> web.Response:
        return web.Response(text=str(received["spans"]))

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/traces", export)
    app.router.add_get("/count", count)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


async def _make_key(base: str) -> str:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{base}/admin/users", json={"name": "bench", "quota_usd": 10_000_000}, headers=admin
        ) as r:
            user = await r.json()
        async with session.post(
            f"{base}/admin/keys", json={"user_id": user["id"], "name": "bench"}, headers=admin
        ) as r:
            return str((await r.json())["key"])


def _spans(collector: str) -> int:
    with urllib.request.urlopen(f"{collector}/count", timeout=10) as answer:
        return int(answer.read())


def main() -> int:
    if not wrk.available():
        print("wrk is not installed (apt-get install -y wrk)", file=sys.stderr)
        return 2
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    ratio = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    scenarios = [s for s in all_scenarios(32, 10_000) if s.name in SCENARIOS]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        log = tmp / "processes.log"
        sim_port, off_port, on_port, otlp_port = (procs.free_port() for _ in range(4))
        started = procs.start_upstream(sim_port, log)
        try:
            collector = procs._spawn(["-m", "bench.telemetry_cost", "collector", str(otlp_port)], log)
            started.append(collector)
            procs.wait_listening(otlp_port, collector)
            collector_url = f"http://127.0.0.1:{otlp_port}"
            off_config = procs.write_config(tmp, "off", off_port, sim_port, ADMIN_KEY)
            on_config = procs.write_config(tmp, "on", on_port, sim_port, ADMIN_KEY)
            with on_config.open("a") as config:
                config.write(f'telemetry: {{otlp_endpoint: "{collector_url}", sample_ratio: {ratio}}}\n')
            server = "granian"
            off = procs.start_gateway(off_config, off_port, server, log)
            started.append(off)
            on = procs.start_gateway(on_config, on_port, server, log)
            started.append(on)
            targets = [
                Target(
                    name,
                    f"http://127.0.0.1:{port}",
                    proc.pid,
                    asyncio.run(_make_key(f"http://127.0.0.1:{port}")),
                    False,
                )
                for name, port, proc in (("off", off_port, off), ("on", on_port, on))
            ]
            calls_on = 0
            for scenario in scenarios:
                for target in targets:
                    measure.check(target, scenario)
                figures = measure.interleaved(targets, scenario, CONNECTIONS, seconds, rounds)
                off_f, on_f = figures
                overhead = (on_f.cpu_us / off_f.cpu_us - 1) * 100
                print(
                    f"{scenario.name:12} c={CONNECTIONS}: CPU per call off {off_f.cpu_us:.0f} us, "
                    f"on {on_f.cpu_us:.0f} us ({overhead:+.1f}%); "
                    f"rps off {off_f.rps:.0f}, on {on_f.rps:.0f}; "
                    f"errors {off_f.errors + on_f.errors}",
                    flush=True,
                )
                calls_on += on_f.requests
            asyncio.run(asyncio.sleep(6))  # the batch processor's last scheduled export (5 s)
            print(
                f"sample_ratio {ratio}: spans received by the collector: {_spans(collector_url)} "
                f"(2 per sampled call; {calls_on} calls timed on the traced gateway)",
                flush=True,
            )
        finally:
            for proc in reversed(started):
                procs.stop(proc)
    return 0


# Sampled calls between two waits for the export: 400 spans, under the SDK's batch (512) and queue
# (2,048), so none is dropped, and about as many as a busy gateway's exports carry (an export costs
# about 0.7 ms of CPU whatever its size: smaller ones would charge the calls that).
FLUSH_EVERY = 200
CALLS, ROUNDS = 20_000, 3  # of ``hooks``


class _Nothing:
    """The four call hooks doing nothing: what pluggy's dispatch of them costs alone."""

    @hookimpl
    def gateway_call_started(self, ctx: object, headers: object) -> None:
        pass

    @hookimpl
    def gateway_attempt_started(self, ctx: object, target: object, number: int, headers: object) -> None:
        pass

    @hookimpl
    def gateway_attempt_ended(self, ctx: object, target: object, status: object, error: object) -> None:
        pass

    @hookimpl
    def gateway_call_finished(self, ctx: object, log: object) -> None:
        pass


# A client's request head as the relay hands it to ``gateway_call_started`` (an SDK's, no trace).
_HEAD = [
    (b"host", b"127.0.0.1:8000"),
    (b"user-agent", b"OpenAI/Python 1.99.0"),
    (b"accept", b"application/json"),
    (b"content-type", b"application/json"),
    (b"authorization", b"Bearer sk-0123456789abcdef0123456789abcdef"),
    (b"content-length", b"120"),
]


def standalone_tracer(endpoint: str, ratio: float) -> CallTracer:
    """The telemetry plugin's tracer outside a gateway: the settings and instance id it reads."""
    from plugins.telemetry.spans import CallTracer

    settings = SimpleNamespace(service_name="bench", sample_ratio=ratio)
    gateway = SimpleNamespace(config=SimpleNamespace(telemetry=settings), instance_id="bench")
    return CallTracer(gateway, endpoint)  # type: ignore[arg-type]


def upstream_target() -> Any:
    """The ``Target`` fields the tracer reads of an attempt's upstream."""
    upstream = SimpleNamespace(name="sim-openai", base_url="http://127.0.0.1:8101", style="standard")
    return SimpleNamespace(upstream=upstream, upstream_model="sim-chat", protocol="chat", name="sim-openai")


def call_context(request_id: str = "req_1") -> Any:
    """The ``CallContext`` fields the tracer reads and writes, of a call arriving now."""
    return SimpleNamespace(route="/v1/chat/completions", family="chat", model=SimpleNamespace(id="sim-chat"),
                           request_id=request_id, arrived=time.perf_counter(), started=0.0,
                           asked_model=None, trace=None)


def call_log() -> RequestLog:
    """A served call's request log row, as ``gateway_call_finished`` is given it."""
    from gateway.accounts.records import RequestLog

    return RequestLog(request_id="req_1", created_at=time.time(), user_id=1, key_id=1, token_name="t",
                      route="/v1/chat/completions", family="chat", model="sim-chat", status=200,
                      outcome="success", use_time_ms=12, prompt_tokens=20, completion_tokens=40,
                      charge_nano=75_000, upstream="sim-openai", attempts=1)


class HooksCost(NamedTuple):
    total_us: float  # hooks, their dispatch and the export, per call
    hooks_us: float  # what the event loop pays (pluggy's dispatch included)
    dispatch_us: float  # of which pluggy's dispatch of the four hooks
    spans: int  # received by the collector


def _calls(hook: Any, contexts: list[Any], target: Any, log: Any) -> None:
    """The hooks of calls with one attempt each, called as the relay calls them."""
    for ctx in contexts:
        hook.gateway_call_started(ctx=ctx, headers=Headers(raw=_HEAD))
        hook.gateway_attempt_started(ctx=ctx, target=target, number=1, headers={})
        hook.gateway_attempt_ended(ctx=ctx, target=target, status=200, error=None)
        hook.gateway_call_finished(ctx=ctx, log=log)


def hooks(ratio: float, calls: int = CALLS, rounds: int = ROUNDS) -> HooksCost:
    """The plugin's own CPU per call, in this process: the four hooks of a call with one attempt,
    called through the gateway's plugin manager as the relay calls them, then the batch processor's
    export of the spans (encoding and HTTP to the collector) waited for every ``FLUSH_EVERY``
    sampled calls, so that no span is dropped (a dropped span's export would make the figure look
    cheaper than it is); the best of ``rounds``. Exact where the wrk runs' figures drift with the
    machine's load. The hooks' share is the event loop's; the export runs in the SDK's thread."""
    from gateway.api.testing import plugin_manager

    def contexts() -> list[Any]:  # the relay's, made before the clock starts
        return [call_context(f"req_{i}") for i in range(calls)]

    port = procs.free_port()
    with tempfile.TemporaryDirectory() as tmp_name:
        collector = procs._spawn(
            ["-m", "bench.telemetry_cost", "collector", str(port)], Path(tmp_name) / "collector.log"
        )
        try:
            procs.wait_listening(port, collector)
            tracer = standalone_tracer(f"http://127.0.0.1:{port}", ratio)
            traced, nothing = plugin_manager(tracer).hook, plugin_manager(_Nothing()).hook
            target, log = upstream_target(), call_log()
            chunk_calls = min(calls, int(FLUSH_EVERY / ratio)) if ratio > 0 else calls
            best = best_hooks = best_dispatch = float("inf")
            for _ in range(rounds):
                made = contexts()
                started = time.process_time()
                _calls(nothing, made, target, log)
                best_dispatch = min(best_dispatch, (time.process_time() - started) / calls)
                made = contexts()
                in_hooks = 0.0
                started = time.process_time()
                for first in range(0, calls, chunk_calls):
                    chunk = time.process_time()
                    _calls(traced, made[first : first + chunk_calls], target, log)
                    in_hooks += time.process_time() - chunk
                    tracer.flush(60)
                best = min(best, (time.process_time() - started) / calls)
                best_hooks = min(best_hooks, in_hooks / calls)
            tracer.close(10)
            received = _spans(f"http://127.0.0.1:{port}")
        finally:
            procs.stop(collector)
    return HooksCost(best * 1e6, best_hooks * 1e6, best_dispatch * 1e6, received)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "collector":
        _collector(int(sys.argv[2]))
        sys.exit(0)
    if len(sys.argv) >= 2 and sys.argv[1] == "hooks":
        for ratio in map(float, sys.argv[2:] or ["1.0"]):
            cost = hooks(ratio)
            print(
                f"sample_ratio {ratio}: {cost.total_us:.1f} us of CPU per call (hooks {cost.hooks_us:.1f} "
                f"of which pluggy's dispatch {cost.dispatch_us:.1f}, export "
                f"{cost.total_us - cost.hooks_us:.1f}); {cost.spans} spans exported of "
                f"{CALLS * ROUNDS} calls",
                flush=True,
            )
        sys.exit(0)
    sys.exit(main())
