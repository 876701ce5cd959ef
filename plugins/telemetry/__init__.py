"""OpenTelemetry traces of every call (issue 36 point 5, CONTRACT 7), a built-in plugin.

With ``telemetry.otlp_endpoint`` set, each metered call is a span (GenAI semantic conventions plus
``gateway.request_id``), each upstream attempt a child span, a client's W3C ``traceparent`` is
continued and a ``traceparent`` goes upstream; the spans are exported over OTLP/HTTP by the
OpenTelemetry SDK's batch processor, in its own thread (``spans``).

Off (the default), this module is all there is: OpenTelemetry is never imported, the call hooks
have no implementation, so the relay never calls them (``Gateway.observes_calls``). On, the
tracer registers itself as the implementation of those hooks at start-up.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Protocol, runtime_checkable

from gateway.api import Gateway, hookimpl

EXTENSION = "telemetry"
SPANS_MODULE = "plugins.telemetry.spans"
FLUSH_TIMEOUT_S = 5.0  # the longest shutdown waits for the last spans to be exported


@runtime_checkable
class Exporting(Protocol):
    """What start-up and shutdown (and tests) need of ``spans.CallTracer``."""

    def flush(self, timeout_s: float) -> bool:
        """Export every span ended so far; False if that took longer than ``timeout_s``."""

    def close(self, timeout_s: float) -> None:
        """Export what is left, then stop the exporting thread."""


def tracer_of(gateway: Gateway) -> Exporting | None:
    """The running gateway's tracer, None while telemetry is off."""
    found = gateway.extensions.get(EXTENSION)
    return found if isinstance(found, Exporting) else None


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    endpoint = gateway.config.telemetry.otlp_endpoint
    if endpoint is None:
        return
    # Imported here, once traces are asked for: a gateway without them never loads OpenTelemetry.
    spans = importlib.import_module(SPANS_MODULE)
    tracer = spans.CallTracer(gateway, endpoint)
    gateway.extensions[EXTENSION] = tracer
    gateway.plugins.register(tracer, name=SPANS_MODULE)


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    tracer = tracer_of(gateway)
    if tracer is None:
        return
    gateway.plugins.unregister(name=SPANS_MODULE)
    del gateway.extensions[EXTENSION]
    # The batch processor's last export is a blocking HTTP call: off the event loop, bounded.
    await asyncio.to_thread(tracer.close, FLUSH_TIMEOUT_S)
