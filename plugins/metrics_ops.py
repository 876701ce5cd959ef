"""The operator series of ``GET /metrics`` beside the per-call ones of ``plugins.metrics``:

* ``gateway_refusal_logs_dropped_total``: refusals not written to the request log (their queue,
  ``logs.refusal_queue_max``, was full); ``gateway_request_log_pruned_total``: rows retention deleted
* ``gateway_uncharged_requests_total``, ``gateway_uncharged_usd_total``: served cost that could
  not be charged (balance or key ceiling exhausted; docs/money.md);
* ``gateway_http_requests_total{method, route, status}``: every HTTP request, refusals (401, 404,
  413, 429) included; ``route`` is the route template (``unmatched`` when no route knows the path);
* ``gateway_requests_in_flight``: HTTP requests being served now;
* ``gateway_spend_usd_total{model, group}``: what metered calls cost (charged), by the user's group;
* ``gateway_time_to_first_token_seconds{model}`` (histogram): streams, to the upstream's first chunk;
* upstream health, per upstream of the config: ``gateway_upstream_cooling_down`` (1 while it is
  left out after a failure), ``gateway_upstream_failures_total``, ``gateway_upstream_cooldowns_total``,
  ``gateway_upstream_error_ratio`` and ``gateway_upstream_latency_seconds`` (the last 5 minutes);
* shared services, as this process last reached them: ``gateway_dependency_up{dependency}`` (1 or 0;
  ``database`` on PostgreSQL, ``redis`` once the rate limits used it),
  ``gateway_dependency_outages_total{dependency}``, and
  ``gateway_ratelimit_redis_unavailable_total{decision}``: rate-limited calls that Redis could not
  count, ``allowed`` or ``refused`` by ``ratelimit.on_redis_error``.

Spend and time to first token are fed with each call (``CallSeries``); the rest is read from the
gateway's own counters when a scrape asks (``OperatorSeries.update``), not counted twice on the
request path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, Literal, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from gateway.api import Gateway
from gateway.api.ops import (
    LOG_RETENTION_EXTENSION,
    RATE_LIMIT_EXTENSION,
    Outage,
    RateLimiter,
    RedisBackend,
    http_stats,
)

MAX_GROUPS = 100  # groups come from the config and the admin API; bounded all the same

LabelValues = tuple[str, ...]
# How prometheus_client's multiprocess mode joins the workers' values of a gauge: each live
# worker's own (a ``pid`` label), or their sum.
WorkersJoin = Literal["liveall", "livesum"]


Metric = TypeVar("Metric", bound=MetricWrapperBase)


class Children(Generic[Metric]):
    """A labelled metric's series, each looked up once: prometheus_client's ``labels()`` checks its
    arguments and takes a lock on every call, which made most of a call's metric updates' cost."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self._known: dict[LabelValues, Metric] = {}

    def __call__(self, *labels: str) -> Metric:
        child = self._known.get(labels)
        if child is None:
            child = self._known[labels] = self.metric.labels(*labels)
        return child


class CallSeries:
    """Spend and time to first token, fed with the metered calls (``Metrics.flush``)."""

    def __init__(self, registry: CollectorRegistry, buckets: tuple[float, ...]) -> None:
        self.spend = Children(Counter(
            "gateway_spend_usd", "Charged cost of metered calls by model and user group.", ("model", "group"),
            registry=registry))
        self.ttft = Children(Histogram(
            "gateway_time_to_first_token_seconds",
            "Streams: from arrival to the upstream's first chunk, by model.", ("model",), buckets=buckets,
            registry=registry))
        self._groups: set[str] = set()

    def first_token(self, model: str, first_byte_ms: int) -> None:
        self.ttft(model).observe(first_byte_ms / 1000)

    def group(self, group: str) -> str:
        """``group`` as a label: the first MAX_GROUPS groups seen, then "other"."""
        if group not in self._groups and len(self._groups) >= MAX_GROUPS:
            return "other"
        self._groups.add(group)
        return group

class _Follower:
    """A prometheus_client counter that follows a running total the gateway keeps elsewhere: each
    update adds what the total grew by since the last one."""

    def __init__(self, counter: Counter, scale: float = 1.0) -> None:
        self.counter = counter
        self.scale = scale
        self._seen: dict[LabelValues, float] = {}

    def follow(self, totals: Iterable[tuple[LabelValues, float]]) -> None:
        for labels, total in totals:
            last = self._seen.get(labels, 0)
            child = self.counter.labels(*labels) if labels else self.counter
            if total != last:
                # A total below the last one started again (an upstream pool rebuilt by a reload).
                child.inc((total - last if total > last else total) * self.scale)
                self._seen[labels] = total


class _Levels:
    """A gauge set from the gateway's state; labels that are gone from it are removed."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self._shown: set[LabelValues] = set()

    def show(self, values: Mapping[LabelValues, float]) -> None:
        for labels, value in values.items():
            (self.gauge.labels(*labels) if labels else self.gauge).set(value)
        for labels in self._shown - values.keys():
            self.gauge.remove(*labels)
        self._shown = set(values)


class OperatorSeries:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, help_text: str, *labels: str, scale: float = 1.0) -> _Follower:
            return _Follower(Counter(name, help_text, labels, registry=registry), scale)

        def gauge(name: str, help_text: str, *labels: str, workers: WorkersJoin = "liveall") -> _Levels:
            return _Levels(Gauge(name, help_text, labels, registry=registry, multiprocess_mode=workers))

        self.uncharged_calls = counter(
            "gateway_uncharged_requests",
            "Served calls whose actual cost exceeded what the balance or key ceiling still allowed.")
        self.uncharged_usd = counter(
            "gateway_uncharged_usd", "Cost of served calls that could not be charged.", scale=1e-9)
        self.refusals_dropped = counter(
            "gateway_refusal_logs_dropped",
            "Refused requests whose request-log row was not written: the refusal queue was full.")
        self.logs_pruned = counter(
            "gateway_request_log_pruned", "Request-log rows deleted by retention (logs.retain_days).")
        self.http_requests = counter(
            "gateway_http_requests", "Every HTTP request by method, route and status.",
            "method", "route", "status")
        self.in_flight = gauge("gateway_requests_in_flight", "HTTP requests being served.", workers="livesum")
        self.cooling_down = gauge("gateway_upstream_cooling_down",
                                  "1 while the upstream is left out after a failure.", "upstream")
        self.failures = counter(
            "gateway_upstream_failures", "Failed upstream attempts since start.", "upstream")
        self.cooldowns = counter(
            "gateway_upstream_cooldowns", "Times the upstream was cooled down since start.", "upstream")
        self.error_ratio = gauge("gateway_upstream_error_ratio",
                                 "Failed share of the upstream's attempts, last 5 minutes.", "upstream")
        self.latency = gauge(
            "gateway_upstream_latency_seconds",
            "Mean time to the first byte of the upstream's successful attempts, last 5 minutes.", "upstream")
        self.dependency_up = gauge("gateway_dependency_up",
                                   "1 while the shared service answered this process last.", "dependency")
        self.outages = counter(
            "gateway_dependency_outages", "Outages of the shared service seen.", "dependency")
        self.redis_unavailable = counter(
            "gateway_ratelimit_redis_unavailable",
            "Rate-limited calls decided by ratelimit.on_redis_error while Redis did not answer.", "decision")

    def update(self, gateway: Gateway) -> None:
        """Bring the series up to the gateway's counters now (cheap: a few dozen numbers)."""
        self.uncharged_calls.follow([((), gateway.meter.uncharged_calls)])
        self.uncharged_usd.follow([((), gateway.meter.uncharged_nano)])
        self.refusals_dropped.follow([((), gateway.meter.refusals_dropped)])
        retention = gateway.extensions.get(LOG_RETENTION_EXTENSION)
        self.logs_pruned.follow([((), getattr(retention, "deleted", 0))])
        stats = http_stats(gateway)
        self.http_requests.follow(stats.requests.items())
        self.in_flight.show({(): stats.in_flight})
        pool = gateway.upstreams
        names = [up.name for up in gateway.config.upstreams]
        health = {name: pool.health.stats(name) for name in names}
        self.cooling_down.show({(n,): int(pool.cooling_until(n) is not None) for n in names})
        self.failures.follow(((n,), pool.failures_total.get(n, 0)) for n in names)
        self.cooldowns.follow(((n,), pool.cooldowns_total.get(n, 0)) for n in names)
        self.error_ratio.show({(n,): health[n].error_rate for n in names})
        self.latency.show({(n,): round(h.latency_ms / 1000, 4) for n, h in health.items()
                           if h.latency_ms is not None})
        self._update_dependencies(gateway)

    def _update_dependencies(self, gateway: Gateway) -> None:
        outages: dict[str, Outage] = {}
        if gateway.storage.outage is not None:
            outages["database"] = gateway.storage.outage
        limiter = gateway.extensions.get(RATE_LIMIT_EXTENSION)
        redis = limiter.backend if isinstance(limiter, RateLimiter) else None
        if isinstance(redis, RedisBackend):
            outages["redis"] = redis.outage
            self.redis_unavailable.follow(((decision,), n) for decision, n in redis.decided.items())
        self.dependency_up.show({(name,): int(not o.down) for name, o in outages.items()})
        self.outages.follow(((name,), o.outages_total) for name, o in outages.items())
