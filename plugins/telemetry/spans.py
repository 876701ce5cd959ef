"""The spans of calls and upstream attempts, exported with the OpenTelemetry SDK (``plugins.telemetry``
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

Cheap by construction (issue 36 point 5): a call's spans are not the SDK's live spans (a lock, a
sampler call and attribute validation per span and per attribute, about half of what tracing cost).
While the call runs the tracer keeps plain ids and timestamps; when a span is over it is handed,
finished, to the SDK's ``BatchSpanProcessor`` as a ``ReadableSpan``, which its thread encodes with
the SDK's OTLP encoder and exports in batches (at most 2,048 queued; more are dropped, not waited
for): the event loop only records. The sampler's decision is taken once per call, with the SDK's
``TraceIdRatioBased`` bound (a trace the gateway starts) or ``ParentBased`` (a client's trace).
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
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, TraceIdRatioBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
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
TRACESTATE = "tracestate"
_EMBEDDING_PATHS = ("/embeddings", ":embedContent", ":batchEmbedContents")
# The trace flags of a trace the gateway starts: its id is random (W3C level 2), as the SDK's own.
_ROOT_SAMPLED = TraceFlags(TraceFlags.SAMPLED | TraceFlags.RANDOM_TRACE_ID)
_ROOT_NOT_SAMPLED = TraceFlags(TraceFlags.RANDOM_TRACE_ID)
_EMPTY_STATE = TraceState()
_RATIO_BITS = TraceIdRatioBased.TRACE_ID_LIMIT  # the bits of a trace id its sampler compares to its bound
_UNSET = Status(StatusCode.UNSET)


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


class _SharedResource(Resource):
    """The one resource of every span, hashed once: the SDK's encoder groups each span by its
    resource, and a ``Resource`` hashes by dumping its attributes to JSON each time (3 us a span)."""

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class _Attempt:
    """An upstream attempt under way (or answered, until the call ends)."""

    __slots__ = ("number", "span_id", "start_ns", "status", "target")

    def __init__(self, target: Target, number: int, span_id: int) -> None:
        self.target = target
        self.number = number
        self.span_id = span_id
        self.start_ns = time.time_ns()
        self.status: int | None = None


class _Call:
    """A sampled call (``CallContext.trace``): its ids and start, until its spans are made."""

    __slots__ = ("attempt", "context", "model", "operation", "parent", "start_ns", "target", "trace_prefix")

    def __init__(
        self, context: SpanContext, parent: SpanContext | None, operation: str, model: str, start_ns: int
    ) -> None:
        self.context = context  # the call's span's
        self.parent = parent  # a client's span, or None
        self.operation = operation
        self.model = model  # asked for (a fallback changes the call's)
        self.start_ns = start_ns
        self.trace_prefix = f"00-{context.trace_id:032x}-"  # of each attempt's traceparent
        self.attempt: _Attempt | None = None  # the attempt open now (or answered, until the call ends)
        self.target: Target | None = None  # the last attempt's upstream


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
        self._resource = _SharedResource(resource)
        self._scope = InstrumentationScope(SCOPE_NAME)
        root = TraceIdRatioBased(settings.sample_ratio)
        self._bound = root.bound  # a trace the gateway starts is sampled below it (TraceIdRatioBased)
        self._sampler = ParentBased(root)  # a client's trace: its sampled flag decides
        self._ids = RandomIdGenerator()
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=EXPORT_TIMEOUT_S)
        self._processor = BatchSpanProcessor(exporter)
        self._propagator = TraceContextTextMapPropagator()

    def flush(self, timeout_s: float) -> bool:
        return self._processor.force_flush(int(timeout_s * 1000))

    def close(self, timeout_s: float) -> None:
        self.flush(timeout_s)
        self._processor.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    def _continued(
        self, ctx: CallContext, headers: Mapping[str, str]
    ) -> tuple[SpanContext | None, TraceFlags]:
        """A client's span (None if its ``traceparent`` is not valid) and the call's trace flags."""
        context = self._propagator.extract(headers)
        parent = trace.get_current_span(context).get_span_context()
        if not parent.is_valid:
            return None, _ROOT_NOT_SAMPLED
        name = f"{operation_of(ctx.route, ctx.family)} {ctx.model.id}"
        decision = self._sampler.should_sample(context, parent.trace_id, name).decision
        sampled = TraceFlags.SAMPLED if decision is Decision.RECORD_AND_SAMPLE else 0
        return parent, TraceFlags((parent.trace_flags & TraceFlags.RANDOM_TRACE_ID) | sampled)

    # Each attribute costs CPU twice (put in a dict here, encoded when exported: most of what a
    # span costs), so a span carries what the GenAI conventions and the brief name, and what an
    # operator finds nowhere else; the request log row (``gateway.request_id``) holds the rest.

    @hookimpl
    def gateway_call_started(self, ctx: CallContext, headers: Mapping[str, str]) -> None:
        parent: SpanContext | None = None
        if TRACEPARENT in headers:
            parent, flags = self._continued(ctx, headers)
        if parent is None:
            trace_id = self._ids.generate_trace_id()
            flags = _ROOT_SAMPLED if trace_id & _RATIO_BITS < self._bound else _ROOT_NOT_SAMPLED
            state = _EMPTY_STATE
        else:
            trace_id, state = parent.trace_id, parent.trace_state
        span_id = self._ids.generate_span_id()
        if flags & TraceFlags.SAMPLED:
            context = SpanContext(trace_id, span_id, False, flags, state)
            operation = operation_of(ctx.route, ctx.family)
            start = _epoch_ns(ctx.arrived if ctx.arrived is not None else ctx.started)
            ctx.trace = _Call(context, parent, operation, ctx.model.id, start)
            return
        # Not sampled: nothing is recorded, and each attempt passes the call's own trace context on
        # (its sampled flag off), worked out once here.
        passed = {TRACEPARENT: f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"}
        if state:
            passed[TRACESTATE] = state.to_header()
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
            self._attempt_over(call, call.attempt, None)
        attempt = _Attempt(target, number, self._ids.generate_span_id())
        call.attempt, call.target = attempt, target
        context = call.context
        headers[TRACEPARENT] = f"{call.trace_prefix}{attempt.span_id:016x}-{context.trace_flags:02x}"
        if context.trace_state:
            headers[TRACESTATE] = context.trace_state.to_header()

    @hookimpl
    def gateway_attempt_ended(
        self, ctx: CallContext, target: Target, status: int | None, error: str | None
    ) -> None:
        call = ctx.trace
        if not isinstance(call, _Call) or call.attempt is None:
            return
        attempt = call.attempt
        attempt.status = status
        if error is None:  # answered: the span ends with the call, once the answer was relayed
            return
        self._attempt_over(call, attempt, error)
        call.attempt = None

    def _attempt_over(self, call: _Call, attempt: _Attempt, error: str | None) -> None:
        """The attempt's span, ended now, to the exporter; ``error`` if it failed."""
        target = attempt.target
        attributes: dict[str, str | int | bool] = {
            "gen_ai.request.model": target.upstream_model,
            "gen_ai.system": system_of(target),
            "gateway.upstream": target.name,
            "gateway.attempt": attempt.number,
            "server.address": _host(target.upstream.base_url),
        }
        if attempt.number > 1:
            attributes["gateway.retry"] = True
        if attempt.status is not None:
            attributes["http.response.status_code"] = attempt.status
        status = _UNSET
        if error is not None:
            failure = str(attempt.status) if attempt.status is not None else "upstream_failure"
            attributes["error.type"] = failure
            status = Status(StatusCode.ERROR, error)
        parent = call.context
        context = SpanContext(parent.trace_id, attempt.span_id, False, parent.trace_flags, parent.trace_state)
        self._export(f"{call.operation} {target.upstream_model}", context, parent, attributes,
                     SpanKind.CLIENT, status, attempt.start_ns)

    @hookimpl
    def gateway_call_finished(self, ctx: CallContext, log: RequestLog) -> None:
        call = ctx.trace
        if not isinstance(call, _Call):
            return
        ctx.trace = None
        if call.attempt is not None:
            self._attempt_over(call, call.attempt, None)
        attributes: dict[str, str | int | bool] = {
            "gen_ai.operation.name": call.operation,
            "gen_ai.request.model": call.model,
            "gateway.request_id": ctx.request_id,
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
        # A server span's error: the gateway's or its upstreams' failure.
        status = Status(StatusCode.ERROR, log.error_code) if log.status >= 500 else _UNSET
        self._export(f"{call.operation} {call.model}", call.context, call.parent, attributes,
                     SpanKind.SERVER, status, call.start_ns)

    def _export(self, name: str, context: SpanContext, parent: SpanContext | None,
                attributes: dict[str, str | int | bool], kind: SpanKind, status: Status,
                start_ns: int) -> None:
        """A finished span, ending now, to the batch processor."""
        self._processor.on_end(
            ReadableSpan(name, context=context, parent=parent, resource=self._resource,
                         attributes=attributes, kind=kind, status=status, start_time=start_ns,
                         end_time=time.time_ns(), instrumentation_scope=self._scope)
        )
