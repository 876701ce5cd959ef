"""``GET /metrics`` in the Prometheus text format, fed by ``gateway_request_finished``.

Series (with ``--workers N``, each worker's, labelled ``worker``, whichever worker answers the
scrape: plugins/metrics_share.py):

* ``gateway_requests_total{route, model, status, outcome}``
* ``gateway_request_duration_seconds{route, model}`` (histogram)
* ``gateway_upstream_errors_total{upstream, outcome}``: upstream failures and cut streams
* ``gateway_tokens_total{model, kind}``: prompt / completion tokens served
* ``gateway_uncharged_requests_total``, ``gateway_uncharged_usd_total``: served cost that could
  not be charged (balance or key ceiling exhausted; docs/money.md)
* every HTTP request, requests in flight, spend by model and group, time to first token, upstream
  health: ``plugins.metrics_ops``
* ``gateway_soft_limit_reached_total{scope}``: soft limits crossed (``gateway_soft_limit_reached``;
  ``scope`` is ``key`` or ``user``), counted by the replica that announced the crossing

The state lives in ``gateway.extensions["metrics"]``, made at start-up: nothing module-global.
Model labels are limited to the catalogue's ids (anything else is ``other``), so a client cannot
grow the series without bound by inventing model names.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.accounts.catalogue import Catalogue
from gateway.accounts.records import RequestLog
from gateway.edge.http import endpoint, get_gateway
from gateway.edge.openapi import documented
from gateway.hooks.specs import hookimpl
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.context import Gateway
from gateway.storage.rows import SoftLimitCrossing
from plugins.metrics_share import Share

EXTENSION = "metrics"
SHARE_EXTENSION = "metrics_share"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
UPSTREAM_FAILURES = frozenset({"upstream_error", "upstream_cut"})
MAX_ROUTES = 200  # distinct route labels kept; later ones are counted as "other"
# ``/v1beta/models/sim-gemini:generateContent`` -> ``/v1beta/models/{model}:generateContent``
_MODEL_IN_PATH = re.compile(r"^(/v1beta|/v1)/models/[^/:]+")


class _Histogram:
    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BUCKETS_S) + 1)  # the last one is +Inf
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.buckets[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self.count += 1
        self.total += seconds


class Metrics:
    """Counters of one app; ``observe`` is O(1) and never blocks the Meter that calls it."""

    def __init__(self, catalogue: Catalogue) -> None:
        self._catalogue = catalogue
        self.requests: defaultdict[tuple[str, str, str, str], int] = defaultdict(int)
        self.latency: defaultdict[tuple[str, str], _Histogram] = defaultdict(_Histogram)
        self.upstream_errors: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.tokens: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.soft_limits: defaultdict[str, int] = defaultdict(int)  # scope -> crossings announced
        self._routes: set[str] = set()
        self._route_of: dict[str, str] = {}  # path -> its route label
        from plugins.metrics_ops import CallSeries  # it builds on this module's helpers

        self.calls = CallSeries()  # spend by model and group, time to first token

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
        model = log.model if self._catalogue.model(log.model) is not None else "other"
        route = self._route(log.route)
        self.requests[(route, model, str(log.status), log.outcome)] += 1
        self.latency[(route, model)].observe(log.use_time_ms / 1000)
        if log.outcome in UPSTREAM_FAILURES:
            self.upstream_errors[(log.upstream or "none", log.outcome)] += 1
        self.calls.observe(log, model)
        if log.prompt_tokens:
            self.tokens[(model, "prompt")] += log.prompt_tokens
        if log.completion_tokens:
            self.tokens[(model, "completion")] += log.completion_tokens

    def render(self) -> str:
        out: list[str] = []
        _family(out, "gateway_requests_total", "counter", "Metered requests by route/model/status/outcome.")
        for (route, model, status, outcome), n in sorted(self.requests.items()):
            labels = _labels(route=route, model=model, status=status, outcome=outcome)
            out.append(f"gateway_requests_total{labels} {n}")
        _family(out, "gateway_request_duration_seconds", "histogram", "Request duration by route and model.")
        for (route, model), hist in sorted(self.latency.items()):
            cumulative = 0
            for bound, n in zip((*BUCKETS_S, "+Inf"), hist.buckets, strict=True):
                cumulative += n
                labels = _labels(route=route, model=model, le=str(bound))
                out.append(f"gateway_request_duration_seconds_bucket{labels} {cumulative}")
            labels = _labels(route=route, model=model)
            out.append(f"gateway_request_duration_seconds_sum{labels} {hist.total:.6f}")
            out.append(f"gateway_request_duration_seconds_count{labels} {hist.count}")
        _family(out, "gateway_upstream_errors_total", "counter", "Upstream failures and cut streams.")
        for (upstream, outcome), n in sorted(self.upstream_errors.items()):
            out.append(f"gateway_upstream_errors_total{_labels(upstream=upstream, outcome=outcome)} {n}")
        _family(out, "gateway_tokens_total", "counter", "Tokens served by model and kind.")
        for (model, kind), n in sorted(self.tokens.items()):
            out.append(f"gateway_tokens_total{_labels(model=model, kind=kind)} {n}")
        _family(out, "gateway_soft_limit_reached_total", "counter", "Soft limits crossed, by key or user.")
        for scope in ("key", "user"):
            out.append(f"gateway_soft_limit_reached_total{_labels(scope=scope)} {self.soft_limits[scope]}")
        return "\n".join(out) + "\n"


def _family(out: list[str], name: str, kind: str, help_text: str) -> None:
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def render_body(gw: Gateway) -> str:
    """This process's whole exposition."""
    metrics: Metrics = gw.extensions[EXTENSION]  # type: ignore[assignment]
    from plugins.metrics_ops import render_ops

    return (metrics.render() + render_uncharged(gw.meter.uncharged_calls, gw.meter.uncharged_nano)
            + render_ops(gw, metrics.calls))


@endpoint(DEFAULT_FAMILY)
@documented("Prometheus metrics (text format)", public=True)
async def metrics_endpoint(request: Request) -> Response:
    gw = get_gateway(request)
    body = render_body(gw)
    share = gw.extensions.get(SHARE_EXTENSION)
    if isinstance(share, Share):  # --workers N: every worker's series, labelled by worker
        body = share.merged(body)
    return Response(body, media_type=CONTENT_TYPE)


def render_uncharged(calls: int, nano: int) -> str:
    """Served cost that could not be charged (counted by the Meter when its settlement commits)."""
    out: list[str] = []
    _family(out, "gateway_uncharged_requests_total", "counter",
            "Served calls whose actual cost exceeded what the balance or key ceiling still allowed.")
    out.append(f"gateway_uncharged_requests_total {calls}")
    _family(out, "gateway_uncharged_usd_total", "counter", "Cost of served calls that could not be charged.")
    out.append(f"gateway_uncharged_usd_total {nano / 1e9:.9f}")
    return "\n".join(out) + "\n"


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    gateway.extensions[EXTENSION] = Metrics(gateway.catalogue)
    share = Share.from_environment(lambda: render_body(gateway))
    if share is not None:
        gateway.extensions[SHARE_EXTENSION] = share


@hookimpl
def gateway_request_finished(gateway: Gateway, log: RequestLog) -> None:
    metrics = gateway.extensions.get(EXTENSION)
    if isinstance(metrics, Metrics):
        metrics.observe(log)
    share = gateway.extensions.get(SHARE_EXTENSION)
    if isinstance(share, Share):
        share.changed()


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    share = gateway.extensions.pop(SHARE_EXTENSION, None)
    if isinstance(share, Share):
        share.stop()


@hookimpl
def gateway_soft_limit_reached(gateway: Gateway, crossing: SoftLimitCrossing) -> None:
    metrics = gateway.extensions.get(EXTENSION)
    if isinstance(metrics, Metrics):
        metrics.soft_limits[crossing.scope] += 1


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [Route("/metrics", metrics_endpoint, methods=["GET"])]
