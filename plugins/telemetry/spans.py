"""The spans of calls and upstream attempts, made with the OpenTelemetry SDK (``plugins.telemetry``
imports this module only when ``telemetry.otlp_endpoint`` is set).

* A call is a SERVER span named ``{gen_ai.operation.name} {gen_ai.request.model}`` (the GenAI
  semantic conventions), from the moment its request head was parsed to its ``finish``: the model
  asked for and the one that served it (a fallback's), the tokens charged, the serving upstream's
  ``gen_ai.system``, the outcome and status, and ``gateway.request_id`` (the answer's
  ``X-Service-Request-Id``, the request log row's id: who called, the charge and the rest are there).
* Each upstream attempt is a CLIENT span under it, named after the upstream's model id: the
  upstream's name and host, the attempt's number (``gateway.retry`` from the second on), the
  status it answered or why it failed. An answered attempt's span lasts until the answer was
  relayed whole (a stream's last byte), not just its first byte.
* A client's W3C ``traceparent`` (and ``tracestate``) makes the call a child of the client's span;
  each attempt sends its own ``traceparent`` upstream, so an upstream that traces joins the trace.
* Sampling: ``sample_ratio`` of the traces the gateway starts; a continued trace follows the
  client's sampled flag (``ParentBased``). A call not sampled still passes its trace on.

Spans go to a private ``TracerProvider`` (never OpenTelemetry's global one: each app, test and
worker has its own), whose ``BatchSpanProcessor`` queues them (at most 2,048; more are dropped, not
waited for) and exports them in batches from its own thread: the event loop only builds spans.
The SDK's ``OTEL_BSP_*`` and ``OTEL_EXPORTER_OTLP_TRACES_*`` environment variables (batch delay,
headers such as a collector's credential, TLS files) apply.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.api import Gateway, hookimpl
from gateway.api.accounts import RequestLog
from gateway.api.relay import CallContext, Target

SCOPE_NAME = "model-gateway"  # the instrumentation scope of every span
EXPORT_TIMEOUT_S = 10.0  # one export request to the collector
TRACES_PATH = "/v1/traces"  # under the collector's base URL, as the SDK's own OTEL_EXPORTER_OTLP_ENDPOINT
# An upstream protocol's gen_ai.system (the GenAI conventions' well-known values).
_SYSTEMS = {"chat": "openai", "responses": "openai", "messages": "anthropic", "v1beta": "gemini"}
TRACEPARENT = "traceparent"
_EMBEDDING_PATHS = ("/embeddings", ":embedContent", ":batchEmbedContents")


def traces_url(endpoint: str) -> str:
    return endpoint.rstrip("/") + TRACES_PATH


def operation_of(route: str, family: str) -> str:
    """The call's ``gen_ai.operation.name`` from the path it came to."""
    if route.endswith(_EMBEDDING_PATHS):
        return "embeddings"
    if family == "v1beta":
        return "generate_content"
    if route.endswith("/completions") and not route.endswith("/chat/completions"):
        return "text_completion"
    if route.startswith("/v1/audio/"):
        return route.rsplit("/", 1)[-1]  # transcriptions, translations, speech
    return "chat"


def system_of(target: Target) -> str:
    if target.upstream.style == "azure":
        return "az.ai.openai"
    return _SYSTEMS.get(target.protocol, target.protocol)


@lru_cache(maxsize=256)
def _host(base_url: str) -> str:
    """An upstream's ``server.address`` (base URLs are checked at load)."""
    return urlsplit(base_url).hostname or ""


class _Call:
    """What the tracer keeps of one call (``CallContext.trace``)."""

    __slots__ = ("attempt", "operation", "span", "target")

    def __init__(self, span: Span, operation: str) -> None:
        self.span = span
        self.operation = operation
        self.attempt: Span | None = None  # the attempt open now (or answered, until the call ends)
        self.target: Target | None = None  # its upstream


class _Passed:
    """A call not sampled: the trace context its attempts pass upstream (``CallContext.trace``)."""

    __slots__ = ("headers",)

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


def _epoch_ns(perf_counter_s: float) -> int:
    """A ``time.perf_counter()`` reading of this process as Unix nanoseconds."""
    return time.time_ns() - int((time.perf_counter() - perf_counter_s) * 1e9)


class CallTracer:
    """The implementation of the call hooks (``gateway.hooks.specs``) of one running gateway."""

    def __init__(self, gateway: Gateway, endpoint: str) -> None:
        settings = gateway.config.telemetry
        resource = Resource.create(
            {"service.name": settings.service_name, "service.instance.id": gateway.instance_id}
        )
        sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        self._provider = TracerProvider(resource=resource, sampler=sampler)
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT_S)
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer(SCOPE_NAME)
        self._propagator = TraceContextTextMapPropagator()

    def flush(self, timeout_s: float) -> bool:
        return self._provider.force_flush(int(timeout_s * 1000))

    def close(self, timeout_s: float) -> None:
        self.flush(timeout_s)
        self._provider.shutdown()

    # Each attribute costs CPU twice (checked when set, encoded when exported: most of what a span
    # costs), so a span carries what the GenAI conventions and the brief name, and what an operator
    # finds nowhere else; the request log row (``gateway.request_id``) holds the rest.

    @hookimpl
    def gateway_call_started(self, ctx: CallContext, headers: Mapping[str, str]) -> None:
        operation = operation_of(ctx.route, ctx.family)
        parent = self._propagator.extract(headers) if TRACEPARENT in headers else None
        span = self._tracer.start_span(
            f"{operation} {ctx.model.id}",
            context=parent,
            kind=SpanKind.SERVER,
            start_time=_epoch_ns(ctx.arrived if ctx.arrived is not None else ctx.started),
            attributes={
                "gen_ai.operation.name": operation,
                "gen_ai.request.model": ctx.model.id,
                "gateway.request_id": ctx.request_id,
            },
        )
        if span.is_recording():
            ctx.trace = _Call(span, operation)
            return
        # Not sampled: nothing is recorded, and each attempt passes the call's own trace context on
        # (its sampled flag off), worked out once here.
        passed: dict[str, str] = {}
        self._propagator.inject(passed, context=trace.set_span_in_context(span))
        ctx.trace = _Passed(passed)

    @hookimpl
    def gateway_attempt_started(
        self, ctx: CallContext, target: Target, number: int, headers: dict[str, str]
    ) -> None:
        call = ctx.trace
        if not isinstance(call, _Call):
            if isinstance(call, _Passed):
                headers.update(call.headers)
            return
        if call.attempt is not None:  # an earlier attempt not reported as ended: it is over now
            call.attempt.end()
        attributes: dict[str, str | int | bool] = {
            "gen_ai.request.model": target.upstream_model,
            "gen_ai.system": system_of(target),
            "gateway.upstream": target.name,
            "gateway.attempt": number,
            "server.address": _host(target.upstream.base_url),
        }
        if number > 1:
            attributes["gateway.retry"] = True
        span = self._tracer.start_span(
            f"{call.operation} {target.upstream_model}",
            context=trace.set_span_in_context(call.span),
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        call.attempt, call.target = span, target
        self._propagator.inject(headers, context=trace.set_span_in_context(span))

    @hookimpl
    def gateway_attempt_ended(
        self, ctx: CallContext, target: Target, status: int | None, error: str | None
    ) -> None:
        call = ctx.trace
        if not isinstance(call, _Call) or call.attempt is None:
            return
        span = call.attempt
        if error is None:  # answered: the span ends with the call, once the answer was relayed
            if status is not None:
                span.set_attribute("http.response.status_code", status)
            return
        if status is not None:
            span.set_attributes({"http.response.status_code": status, "error.type": str(status)})
        else:
            span.set_attribute("error.type", "upstream_failure")
        span.set_status(Status(StatusCode.ERROR, error))
        span.end()
        call.attempt = None

    @hookimpl
    def gateway_call_finished(self, ctx: CallContext, log: RequestLog) -> None:
        call = ctx.trace
        if not isinstance(call, _Call):
            return
        ctx.trace = None
        if call.attempt is not None:
            call.attempt.end()
        span = call.span
        attributes: dict[str, str | int | bool] = {
            "gen_ai.response.model": log.model,
            "gen_ai.usage.input_tokens": log.prompt_tokens,
            "gen_ai.usage.output_tokens": log.completion_tokens,
            "http.response.status_code": log.status,
            "gateway.outcome": log.outcome,
        }
        if call.target is not None:
            attributes["gen_ai.system"] = system_of(call.target)
        if ctx.asked_model is not None:
            attributes["gateway.fallback_from"] = ctx.asked_model
        if log.error_code is not None:
            attributes["error.type"] = log.error_code
        span.set_attributes(attributes)
        if log.status >= 500:  # a server span's error: the gateway's or its upstreams' failure
            span.set_status(Status(StatusCode.ERROR, log.error_code))
        span.end()
