"""``GET /metrics`` in the Prometheus text format (``prometheus_client``), fed by
``gateway_request_finished``.

Series:

* ``gateway_requests_total{route, model, status, outcome}``
* ``gateway_request_duration_seconds{route, model}`` (histogram)
* ``gateway_upstream_errors_total{upstream, outcome}``: upstream failures and cut streams
* ``gateway_tokens_total{model, kind}``: prompt / completion tokens served
* ``gateway_soft_limit_reached_total{scope}``: soft limits crossed (``gateway_soft_limit_reached``;
  ``scope`` is ``key`` or ``user``), counted by the replica that announced the crossing
* served cost that could not be charged, every HTTP request, requests in flight, spend by model and
  group, time to first token, upstream health and shared services: ``plugins.metrics_ops``

With ``gateway serve --workers N`` the workers share prometheus_client's multiprocess directory
(``plugins.metrics_workers``): whichever worker answers a scrape reports every worker's counts.

In one process, a call's figures are kept as one tuple and handed to prometheus_client in batches
(``Metrics.flush``: at each scrape, and every ``FLUSH_AT`` calls): one ``inc(n)`` per series of a
batch instead of one locked update per series of each call. With several workers each call is
written at once, as a scrape may be answered by another worker reading the shared files.

The state lives in ``gateway.extensions["metrics"]`` (a registry of its own per app, made at
start-up): nothing module-global. Model labels are limited to the catalogue's ids (anything else is
``other``), so a client cannot grow the series without bound by inventing model names.
"""

from __future__ import annotations

import os
import re

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import DEFAULT_FAMILY, Gateway, documented, endpoint, get_gateway, hookimpl
from gateway.api.accounts import Catalogue, RequestLog, SoftLimitCrossing
from gateway.api.ops import group_of
from plugins.metrics_ops import CallSeries, Children, OperatorSeries
from plugins.metrics_workers import MULTIPROC_ENV, Workers

EXTENSION = "metrics"
# The classic text format: every Prometheus version reads it.
CONTENT_TYPE = prometheus_client.exposition.CONTENT_TYPE_PLAIN_0_0_4
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
UPSTREAM_FAILURES = frozenset({"upstream_error", "upstream_cut"})
MAX_ROUTES = 200  # distinct route labels kept; later ones are counted as "other"
# ``/v1beta/models/sim-gemini:generateContent`` -> ``/v1beta/models/{model}:generateContent``
_MODEL_IN_PATH = re.compile(r"^(/v1beta|/v1)/models/[^/:]+")
FLUSH_AT = 128  # calls kept before a flush without a scrape: a flush of 128 holds the loop about 0.2 ms

# What ``Metrics.observe`` keeps of a call until the next flush, read from its log at once: the
# Meter's settlement rewrites ``charge_nano`` later, and the user's group is the request's own.
# (route, model, status, outcome, upstream, use_time_ms, prompt, completion, charge_nano, group,
# first_byte_ms of a stream)
_Call = tuple[str, str, int, str, "str | None", int, int, int, int, str, "int | None"]


class Metrics:
    """The series of one app; ``observe`` keeps a call's figures in one tuple (a flush every
    ``FLUSH_AT`` calls hands them on), and never blocks the Meter that calls it."""

    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self.registry = registry = CollectorRegistry(auto_describe=False)
        self.requests = Children(Counter(
            "gateway_requests", "Metered requests by route/model/status/outcome.",
            ("route", "model", "status", "outcome"), registry=registry))
        self.latency = Children(Histogram(
            "gateway_request_duration_seconds", "Request duration by route and model.", ("route", "model"),
            buckets=BUCKETS_S, registry=registry))
        self.upstream_errors = Children(Counter(
            "gateway_upstream_errors", "Upstream failures and cut streams.", ("upstream", "outcome"),
            registry=registry))
        self.tokens = Children(Counter(
            "gateway_tokens", "Tokens served by model and kind.", ("model", "kind"), registry=registry))
        self.soft_limits = Counter("gateway_soft_limit_reached", "Soft limits crossed, by key or user.",
                                   ("scope",), registry=registry)
        for scope in ("key", "user"):
            self.soft_limits.labels(scope)  # shown from the start, at 0
        self.operator = OperatorSeries(registry)
        self.calls = CallSeries(registry, BUCKETS_S)  # spend by model and group, time to first token
        self._routes: set[str] = set()
        self._route_of: dict[str, str] = {}  # path -> its route label
        self._pending: list[_Call] = []
        # Several workers share their series through files a scrape of any of them reads: written
        # with each call there.
        self._at_once = bool(os.environ.get(MULTIPROC_ENV))

    def _route(self, path: str) -> str:
        """The route label: the model taken out of the path (it has its own label), and a bound
        on how many there can be (task ids in paths would otherwise grow the series forever)."""
        known = self._route_of.get(path)
        if known is not None:
            return known
        route = _MODEL_IN_PATH.sub(r"\1/models/{model}", path)
        if route not in self._routes:
            if len(self._routes) >= MAX_ROUTES:
                return "other"
            self._routes.add(route)
        if len(self._route_of) < MAX_ROUTES:  # the paths seen first, remembered (bounded too)
            self._route_of[path] = route
        return route

    def observe(self, log: RequestLog) -> None:
        charge = log.charge_nano
        pending = self._pending
        pending.append((log.route, log.model, log.status, log.outcome, log.upstream, log.use_time_ms,
                        log.prompt_tokens, log.completion_tokens, charge, group_of(log) if charge else "",
                        log.first_byte_ms if log.is_stream else None))
        if self._at_once or len(pending) >= FLUSH_AT:
            self.flush()

    def flush(self) -> None:
        """Hand the calls kept since the last flush to the series, in the order they ended (the
        bounds on routes and groups let in the same first ones)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        requests: dict[tuple[str, str, str, str], int] = {}
        errors: dict[tuple[str, str], int] = {}
        tokens: dict[tuple[str, str], int] = {}
        spend: dict[tuple[str, str], int] = {}
        labels: dict[str, str] = {}
        latency, calls = self.latency, self.calls
        for call in pending:
            path, model_id, status, outcome, upstream, use_ms, prompt, completion, charge, group, first = call
            model = labels.get(model_id)
            if model is None:  # a wildcard's ids as their pattern
                model = labels[model_id] = self._catalogue.label(model_id) or "other"
            route = self._route(path)
            key = (route, model, str(status), outcome)
            requests[key] = requests.get(key, 0) + 1
            latency(route, model).observe(use_ms / 1000)
            if outcome in UPSTREAM_FAILURES:
                failed = (upstream or "none", outcome)
                errors[failed] = errors.get(failed, 0) + 1
            if charge:
                spent = (model, calls.group(group))
                spend[spent] = spend.get(spent, 0) + charge
            if first is not None:
                calls.first_token(model, first)
            if prompt:
                tokens[model, "prompt"] = tokens.get((model, "prompt"), 0) + prompt
            if completion:
                tokens[model, "completion"] = tokens.get((model, "completion"), 0) + completion
        for series, n in requests.items():
            self.requests(*series).inc(n)
        for pair, n in errors.items():
            self.upstream_errors(*pair).inc(n)
        for pair, n in tokens.items():
            self.tokens(*pair).inc(n)
        for pair, nano in spend.items():
            calls.spend(*pair).inc(nano / 1e9)


def exposition(gw: Gateway) -> bytes:
    """The scrape's answer: this process's series, or with several workers, every worker's."""
    metrics: Metrics = gw.extensions[EXTENSION]  # type: ignore[assignment]
    metrics.flush()
    metrics.operator.update(gw)
    workers = Workers.of(gw)
    if workers is not None:
        return workers.exposition()
    return prometheus_client.generate_latest(metrics.registry)


@endpoint(DEFAULT_FAMILY)
@documented("Prometheus metrics (text format)", public=True)
async def metrics_endpoint(request: Request) -> Response:
    return Response(exposition(get_gateway(request)), media_type=CONTENT_TYPE)


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    # The ``*_created`` timestamps series are left out, as Prometheus itself does not read them.
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    Workers.start(gateway, lambda: metrics.operator.update(gateway))
    metrics = Metrics(gateway.catalogue)
    gateway.extensions[EXTENSION] = metrics


@hookimpl
def gateway_request_finished(gateway: Gateway, log: RequestLog) -> None:
    metrics = gateway.extensions.get(EXTENSION)
    if isinstance(metrics, Metrics):
        metrics.observe(log)
        workers = Workers.of(gateway)
        if workers is not None:
            workers.changed()


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    Workers.stop(gateway)


@hookimpl
def gateway_soft_limit_reached(gateway: Gateway, crossing: SoftLimitCrossing) -> None:
    metrics = gateway.extensions.get(EXTENSION)
    if isinstance(metrics, Metrics):
        metrics.soft_limits.labels(crossing.scope).inc()


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [Route("/metrics", metrics_endpoint, methods=["GET"])]
