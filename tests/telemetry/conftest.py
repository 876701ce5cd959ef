"""Fixtures of the telemetry tests (issue 36 point 5): a local OTLP/HTTP collector that decodes what
the gateway exports (``ExportTraceServiceRequest``, with ``opentelemetry-proto``), and a gateway
whose ``telemetry.otlp_endpoint`` points at it, over the session simulator.

Fault options ride on the upstream credential (``gateway_simulator.context``): ``sk-sim-fail503``
fails every call.
"""

from __future__ import annotations

import asyncio
import gzip
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest_asyncio
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from plugins.telemetry import tracer_of

if TYPE_CHECKING:  # the root conftest is not importable as a module under pytest's import mode
    from tests.conftest import GatewayHandle, MakeConfig, StartGateway

PRICE = {"input_per_mtok": 1, "output_per_mtok": 2}
SERVER, CLIENT = 2, 3  # Span.SpanKind of the OTLP protobuf
STATUS_ERROR = 2  # Status.StatusCode


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass
class ReceivedSpan:
    name: str
    kind: int
    trace_id: str  # hex, as in a traceparent
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, Any]
    status_code: int
    resource: dict[str, Any]
    start_ns: int
    end_ns: int


@dataclass
class Collector:
    """What an OTLP/HTTP collector received on ``/v1/traces``."""

    base_url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0

    async def receive(self, request: web.Request) -> web.Response:
        assert request.content_type == "application/x-protobuf"
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        self.requests += 1
        for resource_spans in message.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            status_code=span.status.code,
                            resource=resource,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    def calls(self, request_id: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.attributes.get("gateway.request_id") == request_id]

    def call(self, request_id: str) -> ReceivedSpan:
        found = self.calls(request_id)
        assert len(found) == 1, (request_id, self.spans)
        return found[0]

    def children(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        found = [
            s for s in self.spans if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id
        ]
        return sorted(found, key=lambda s: s.attributes["gateway.attempt"])


@pytest_asyncio.fixture
async def collector() -> AsyncIterator[Collector]:
    received = Collector()
    app = web.Application()
    app.router.add_post("/v1/traces", received.receive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    received.base_url = f"http://127.0.0.1:{port}"
    yield received
    await runner.cleanup()


def telemetry_models() -> list[dict[str, Any]]:
    return [
        {"id": "t-chat", "price": PRICE},
        {"id": "t-flaky", "price": PRICE},  # its first upstream fails, the second answers
        {"id": "t-down", "price": PRICE, "fallbacks": ["t-chat"]},
        {"id": "t-dead", "price": PRICE},  # every upstream fails
    ]


def telemetry_upstreams(base_url: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "t-up",
            "protocol": "chat",
            "base_url": base_url,
            "api_key": "sk-sim",
            "models": {"t-chat": "sim-chat", "t-flaky": "sim-chat"},
            "priority": 1,
        },
        {
            "name": "t-broken",
            "protocol": "chat",
            "base_url": base_url,
            "api_key": "sk-sim-fail503",
            "models": {"t-flaky": "sim-chat", "t-down": "sim-chat", "t-dead": "sim-chat"},
            "priority": 0,
        },
    ]


def telemetry_config(make_config: MakeConfig, base_url: str, endpoint: str, **telemetry: Any) -> Any:
    return make_config(
        extra_models=telemetry_models(),
        extra_upstreams=telemetry_upstreams(base_url),
        routing={"max_attempts": 2, "cooldown_s": 0.001},
        telemetry={"otlp_endpoint": endpoint, "service_name": "gw-under-test", **telemetry},
    )


@pytest_asyncio.fixture
async def traced_gw(
    gateway_server: StartGateway, make_config: MakeConfig, simulator: Any, collector: Collector
) -> GatewayHandle:
    """Telemetry on, every trace sampled; user ``u`` with key ``gw.key``."""
    handle = await gateway_server(telemetry_config(make_config, simulator.base_url, collector.base_url))
    handle.user = await handle.create_user("u", quota_usd=100)
    handle.key_record = await handle.create_key(handle.user["id"], name="test")
    return handle


async def exported(gw: GatewayHandle) -> None:
    """Every span ended so far is at the collector (the export runs in the SDK's thread, which
    must reach the collector served by this event loop: waited for off the loop)."""
    tracer = tracer_of(gw.gateway)
    assert tracer is not None
    assert await asyncio.to_thread(tracer.flush, 10.0)


async def call_span(gw: GatewayHandle, collector: Collector, request_id: str) -> ReceivedSpan:
    """The span of the call ``request_id``, once exported (a call's span ends with its ``finish``,
    which a whole answer runs just after handing the body over: looked for until it is there)."""
    deadline = asyncio.get_running_loop().time() + 10
    while not collector.calls(request_id):
        assert asyncio.get_running_loop().time() < deadline, f"no span of {request_id}"
        await exported(gw)
        await asyncio.sleep(0.01)
    return collector.call(request_id)


def nonce() -> str:
    return f"telemetry-test {secrets.token_hex(6)} sim:tokens=5"


async def upstream_headers(sim_base_url: str, marker: str) -> list[dict[str, str]]:
    """The headers of each request holding ``marker`` that reached the simulator, in order."""
    async with aiohttp.ClientSession() as http, http.get(f"{sim_base_url}/_sim/requests") as resp:
        entries = await resp.json()
    return [entry["headers"] for entry in entries if marker in str(entry.get("body_json_or_null"))]


def traceparent(trace_id: str, span_id: str, sampled: bool = True) -> str:
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


def sent_ids(header: str) -> tuple[str, str, bool]:
    """A ``traceparent``'s trace id, parent span id and sampled flag (other flags, such as level 2's
    random trace id, aside)."""
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00"
    return trace_id, span_id, bool(int(flags, 16) & 1)
