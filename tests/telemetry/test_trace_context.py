"""The trace context the tracer works out itself (``plugins.telemetry.spans``: the ``traceparent``
is formatted there, not by the SDK's propagator), its four hooks called directly: W3C's format, the
random-trace-id flag of a trace the gateway starts, a client's flags and ``tracestate`` kept, a
``traceparent`` that is not valid starting a trace of the gateway's own."""

from __future__ import annotations

import asyncio
import re
import secrets

from bench.telemetry_cost import call_context, call_log, standalone_tracer, upstream_target
from plugins.telemetry.spans import CallTracer

from .conftest import Collector

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
TARGET = upstream_target()
LOG = call_log()


def _call(tracer: CallTracer, headers: dict[str, str]) -> dict[str, str]:
    """One call with one answered attempt; the headers the attempt sent upstream."""
    ctx = call_context()
    tracer.gateway_call_started(ctx, headers)
    sent: dict[str, str] = {}
    tracer.gateway_attempt_started(ctx, TARGET, 1, sent)
    tracer.gateway_attempt_ended(ctx, TARGET, 200, None)
    tracer.gateway_call_finished(ctx, LOG)
    return sent


def _parts(sent: dict[str, str]) -> tuple[str, str, int]:
    match = TRACEPARENT.match(sent["traceparent"])
    assert match is not None, sent
    return match[1], match[2], int(match[3], 16)


async def test_a_trace_the_gateway_starts(collector: Collector) -> None:
    """Sampled: flags 03 (sampled, random trace id, as the SDK's own), the attempt's span id sent."""
    tracer = standalone_tracer(collector.base_url, 1.0)
    try:
        trace_id, span_id, flags = _parts(_call(tracer, {}))
        assert flags == 0x03
        assert await asyncio.to_thread(tracer.flush, 10.0)
    finally:
        await asyncio.to_thread(tracer.close, 5.0)
    [attempt] = [s for s in collector.spans if s.span_id == span_id]
    [call] = [s for s in collector.spans if s.span_id == attempt.parent_span_id]
    assert attempt.trace_id == call.trace_id == trace_id and call.parent_span_id == ""


def test_a_trace_not_sampled_is_passed_on() -> None:
    tracer = standalone_tracer("http://127.0.0.1:9", 0.0)
    first, second = _call(tracer, {}), _call(tracer, {})
    assert _parts(first)[2] == 0x02 and "tracestate" not in first  # random trace id, not sampled
    assert _parts(first)[0] != _parts(second)[0]
    # A client's unsampled trace: its id, flags (here without the random flag) and tracestate.
    trace_id = secrets.token_hex(16)
    sent = _call(tracer, {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-00", "tracestate": "v=1"})
    assert (_parts(sent)[0], _parts(sent)[2], sent["tracestate"]) == (trace_id, 0x00, "v=1")
    tracer.close(1.0)


async def test_a_clients_flags_are_kept(collector: Collector) -> None:
    """Sampled whatever the ratio when the client's is (ParentBased); its random flag kept."""
    tracer = standalone_tracer(collector.base_url, 0.0)
    try:
        trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
        sent = _call(tracer, {"traceparent": f"00-{trace_id}-{parent}-03", "tracestate": "a=b,c=d"})
        assert (_parts(sent)[0], _parts(sent)[2], sent["tracestate"]) == (trace_id, 0x03, "a=b,c=d")
        assert await asyncio.to_thread(tracer.flush, 10.0)
    finally:
        await asyncio.to_thread(tracer.close, 5.0)
    [call] = [s for s in collector.spans if s.parent_span_id == parent]
    assert call.trace_id == trace_id


def test_a_traceparent_not_valid_starts_a_trace() -> None:
    tracer = standalone_tracer("http://127.0.0.1:9", 0.0)
    zero_trace, version_ff = f"00-{'0' * 32}-{'1' * 16}-01", f"ff-{'1' * 32}-{'1' * 16}-01"
    for header in (zero_trace, "garbage", version_ff):
        trace_id, _, flags = _parts(_call(tracer, {"traceparent": header}))
        assert trace_id not in header and flags == 0x02
    tracer.close(1.0)
