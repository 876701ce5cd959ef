"""The operator series of ``GET /metrics`` beside the per-call ones of ``plugins.metrics``:

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

Per process, like the rest of ``/metrics``.
"""

from __future__ import annotations

from collections import defaultdict

from gateway.accounts.records import RequestLog
from gateway.runtime.context import Gateway
from gateway.runtime.observe import group_of, http_stats
from plugins.metrics import BUCKETS_S, _family, _Histogram, _labels


class CallSeries:
    """Spend and time to first token, fed with each metered call (``Metrics.observe``)."""

    def __init__(self) -> None:
        self.spend_nano: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.ttft: defaultdict[str, _Histogram] = defaultdict(_Histogram)
        self._groups: set[str] = set()

    def observe(self, log: RequestLog, model: str) -> None:
        if log.charge_nano:
            self.spend_nano[(model, self._group(group_of(log)))] += log.charge_nano
        if log.is_stream and log.first_byte_ms is not None:
            self.ttft[model].observe(log.first_byte_ms / 1000)

    def _group(self, group: str) -> str:
        # Groups come from the config and the admin API; bounded all the same.
        if group not in self._groups and len(self._groups) >= 100:
            return "other"
        self._groups.add(group)
        return group

    def render(self, out: list[str]) -> None:
        _family(out, "gateway_spend_usd_total", "counter",
                "Charged cost of metered calls by model and user group.")
        for (model, group), nano in sorted(self.spend_nano.items()):
            out.append(f"gateway_spend_usd_total{_labels(model=model, group=group)} {nano / 1e9:.9f}")
        _family(out, "gateway_time_to_first_token_seconds", "histogram",
                "Streams: from arrival to the upstream's first chunk, by model.")
        for model, hist in sorted(self.ttft.items()):
            cumulative = 0
            for bound, n in zip((*BUCKETS_S, "+Inf"), hist.buckets, strict=True):
                cumulative += n
                labels = _labels(model=model, le=str(bound))
                out.append(f"gateway_time_to_first_token_seconds_bucket{labels} {cumulative}")
            out.append(f"gateway_time_to_first_token_seconds_sum{_labels(model=model)} {hist.total:.6f}")
            out.append(f"gateway_time_to_first_token_seconds_count{_labels(model=model)} {hist.count}")


def render_ops(gateway: Gateway, calls: CallSeries) -> str:
    out: list[str] = []
    stats = http_stats(gateway)
    _family(out, "gateway_http_requests_total", "counter", "Every HTTP request by method, route and status.")
    for (method, route, status), n in sorted(stats.requests.items()):
        out.append(f"gateway_http_requests_total{_labels(method=method, route=route, status=status)} {n}")
    _family(out, "gateway_requests_in_flight", "gauge", "HTTP requests being served.")
    out.append(f"gateway_requests_in_flight {stats.in_flight}")
    calls.render(out)
    pool = gateway.upstreams
    names = [up.name for up in gateway.config.upstreams]
    health = {name: pool.health.stats(name) for name in names}
    per_upstream: list[tuple[str, str, str, dict[str, int | float]]] = [
        ("gateway_upstream_cooling_down", "gauge", "1 while the upstream is left out after a failure.",
         {n: int(pool.cooling_until(n) is not None) for n in names}),
        ("gateway_upstream_failures_total", "counter", "Failed upstream attempts since start.",
         {n: pool.failures_total.get(n, 0) for n in names}),
        ("gateway_upstream_cooldowns_total", "counter", "Times the upstream was cooled down since start.",
         {n: pool.cooldowns_total.get(n, 0) for n in names}),
        ("gateway_upstream_error_ratio", "gauge", "Failed share of the upstream's attempts, last 5 minutes.",
         {n: health[n].error_rate for n in names}),
        ("gateway_upstream_latency_seconds", "gauge",
         "Mean time to the first byte of the upstream's successful attempts, last 5 minutes.",
         {n: round(h.latency_ms / 1000, 4) for n, h in health.items() if h.latency_ms is not None}),
    ]
    for metric, kind, help_text, values in per_upstream:
        _family(out, metric, kind, help_text)
        out.extend(f"{metric}{_labels(upstream=name)} {value}" for name, value in values.items())
    _render_dependencies(gateway, out)
    return "\n".join(out) + "\n"


def _render_dependencies(gateway: Gateway, out: list[str]) -> None:
    from gateway.accounts.ratelimit import EXTENSION, RateLimiter, RedisBackend

    outages = {}
    if gateway.storage.outage is not None:
        outages["database"] = gateway.storage.outage
    limiter = gateway.extensions.get(EXTENSION)
    redis = limiter.backend if isinstance(limiter, RateLimiter) else None
    if isinstance(redis, RedisBackend):
        outages["redis"] = redis.outage
    _family(out, "gateway_dependency_up", "gauge", "1 while the shared service answered this process last.")
    out.extend(f"gateway_dependency_up{_labels(dependency=name)} {int(not o.down)}"
               for name, o in outages.items())
    _family(out, "gateway_dependency_outages_total", "counter", "Outages of the shared service seen.")
    out.extend(f"gateway_dependency_outages_total{_labels(dependency=name)} {o.outages_total}"
               for name, o in outages.items())
    _family(out, "gateway_ratelimit_redis_unavailable_total", "counter",
            "Rate-limited calls decided by ratelimit.on_redis_error while Redis did not answer.")
    if isinstance(redis, RedisBackend):
        out.extend(f"gateway_ratelimit_redis_unavailable_total{_labels(decision=d)} {n}"
                   for d, n in redis.decided.items())
