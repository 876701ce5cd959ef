"""Upstreams: which ones may serve a model, in what order, and the one pooled HTTP client of every
call to them (``gateway.upstream.client``; requests are sent, and their failures mapped, by
``gateway.upstream.attempt``).

Routing: candidates by ``priority`` (lower first), shuffled by ``weight`` among equals. An upstream
that failed (connect error, timeout, 429, 5xx) is cooled down for ``routing.cooldown_s``: it moves
to the back of every candidate list until the time passes, then comes back by itself.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Mapping
from typing import Protocol, cast
from urllib.parse import urlsplit

import aiohttp
import msgspec

from gateway.relay.translation import TEXT_CAPABILITIES, ProtocolAdapter, UpstreamAdapter
from gateway.runtime.errors import GatewayError, InvalidRequest, UpstreamError
from gateway.runtime.secrets_scrub import without_empty_credentials
from gateway.settings.config import Config, LimitsConfig, UpstreamConfig
from gateway.settings.model_ids import ModelTable, upstream_id
from gateway.upstream.client import USER_AGENT, Destination, UpstreamClient
from gateway.upstream.health import UpstreamHealth

LOCATED_MAX = 4096  # text call destinations remembered per pool; later ones are made each time


class UrlStyle(Protocol):
    """A non-standard layout of an upstream's URLs and credential, declared by a protocol's adapter
    in ``url_styles`` (e.g. ``chat``'s ``azure``) and picked with ``upstreams[].style``."""

    def locate(self, upstream: UpstreamConfig, path: str, upstream_model: str) -> tuple[str, dict[str, str]]:
        """The protocol's standard ``path`` (with its query) -> this style's path under
        ``base_url`` and the headers that carry the credential."""
        ...


def join_url(base_url: str, path: str, version_prefix: str = "") -> str:
    """``base_url`` + ``path``, where a ``base_url`` that already ends in the protocol's version
    segment (``https://api.openai.com/v1``, ``https://api.groq.com/openai/v1``) is not given it
    twice: users copy base URLs from vendors' docs both with and without it."""
    base = base_url.rstrip("/")
    rest = path[len(version_prefix):]
    if version_prefix and path.startswith(version_prefix) and rest[:1] in ("/", "?", ""):
        if urlsplit(base).path.endswith(version_prefix):
            path = rest
    return base + path


class Target(msgspec.Struct, frozen=True):
    """One upstream able to serve one public model, under the id it knows the model by."""

    upstream: UpstreamConfig
    upstream_model: str

    @property
    def name(self) -> str:
        return self.upstream.name

    @property
    def protocol(self) -> str:
        return self.upstream.protocol


class UpstreamPool:
    def __init__(self, config: Config, adapters: Mapping[str, ProtocolAdapter]) -> None:
        self._config = config
        self._adapters = adapters
        self._targets = self._routing(config)
        self._cool_until: dict[str, float] = {}
        self.health = UpstreamHealth()  # recent attempts, for GET /admin/upstreams
        # Since start, per upstream (``/metrics``): failed attempts, and how often it was cooled down.
        self.failures_total: defaultdict[str, int] = defaultdict(int)
        self.cooldowns_total: defaultdict[str, int] = defaultdict(int)
        self.http = UpstreamClient(config.limits)
        self._rng = random.Random()
        # (upstream, path, model) -> where a text call goes: the same few calls are made on every
        # request (emptied by a reload).
        self._destinations: dict[tuple[str, str, str], Destination] = {}

    @staticmethod
    def _routing(config: Config) -> ModelTable[list[Target]]:
        """Targets by public id and by pattern (``vendor/*``: a pattern's targets hold the
        upstream side of the entry, resolved per call by ``_found``)."""
        targets: dict[str, list[Target]] = defaultdict(list)
        for upstream in config.upstreams:
            for public, private in upstream.model_map().items():
                targets[public].append(Target(upstream, private))
        return ModelTable(targets)

    def _found(self, model_id: str) -> list[Target]:
        """The targets of ``model_id``: its own entries, else those of the longest pattern that
        covers it, each asked for the remainder (``gateway.settings.model_ids.upstream_id``)."""
        found = self._targets.lookup(model_id)
        if found is None:
            return []
        entry, targets = found
        if entry == model_id:
            return targets
        return [Target(t.upstream, upstream_id(entry, t.upstream_model, model_id)) for t in targets]

    def reconfigure(self, config: Config) -> None:
        """A reloaded config's upstreams (``gateway.runtime.reload``): routing for calls that start
        from now on; the health of an upstream that keeps its name, and the pooled connections,
        stay. A call in flight keeps the targets it started with."""
        self._targets = self._routing(config)
        self._config = config
        self._destinations = {}
        self.http.limits = config.limits

    async def start(self) -> None:
        await self.http.start()

    async def stop(self) -> None:
        await self.http.stop()

    # --- routing ----------------------------------------------------------------------------------

    def targets(self, model_id: str, capability: str | None = None) -> list[Target]:
        """All targets of a model in routing order (see module docstring); with ``capability``
        ("generate", "embed", a media family's own kind) only upstreams whose protocol's adapter
        declares it."""
        found = self._found(model_id)
        if capability is not None:
            found = [t for t in found if self.can(t.protocol, capability)]
        if len(found) < 2:  # nothing to order: the common case of one upstream per model
            return list(found)
        by_priority: dict[int, list[Target]] = defaultdict(list)
        for target in found:
            by_priority[target.upstream.priority].append(target)
        ordered: list[Target] = []
        for priority in sorted(by_priority):
            ordered.extend(self._weighted_shuffle(by_priority[priority]))
        now = time.monotonic()
        healthy = [t for t in ordered if self._cool_until.get(t.name, 0.0) <= now]
        cooling = [t for t in ordered if self._cool_until.get(t.name, 0.0) > now]
        return healthy + cooling

    def _weighted_shuffle(self, group: list[Target]) -> list[Target]:
        if len(group) < 2:
            return group
        pool = list(group)
        out: list[Target] = []
        while pool:
            pick = self._rng.choices(range(len(pool)), weights=[t.upstream.weight for t in pool])[0]
            out.append(pool.pop(pick))
        return out

    def mark_failure(self, name: str, latency_ms: float | None = None, cool_s: float | None = None) -> None:
        """A failed attempt: ``name`` cools down for ``cool_s`` (a 429's Retry-After), else for
        ``routing.cooldown_s``."""
        now = time.monotonic()
        if self._cool_until.get(name, 0.0) <= now:
            self.cooldowns_total[name] += 1
        self.failures_total[name] += 1
        self._cool_until[name] = now + (self._config.routing.cooldown_s if cool_s is None else cool_s)
        self.health.record(name, False, latency_ms)

    def mark_success(self, name: str, latency_ms: float | None = None) -> None:
        self._cool_until.pop(name, None)
        self.health.record(name, True, latency_ms)

    def end_cooldown(self, name: str) -> bool:
        """An operator's reset (``POST /admin/upstreams/{name}/reset``): ``name`` is tried in its
        normal order again at once; False when it was not cooling down. This process only."""
        return self._cool_until.pop(name, 0.0) > time.monotonic()

    def cooling_until(self, name: str) -> float | None:
        """Unix time at which ``name``'s cool-down ends; None when it is not cooling down."""
        left = self._cool_until.get(name, 0.0) - time.monotonic()
        return time.time() + left if left > 0 else None

    # --- HTTP ------------------------------------------------------------------------------------

    def locate(self, upstream: UpstreamConfig, path: str,
               upstream_model: str = "") -> tuple[str, dict[str, str]]:
        """The URL of one call (``path``: the protocol's standard path and query) and the headers
        every call to ``upstream`` carries: its credential as the protocol (or its style) sends
        it, then the upstream's own ``headers``. The one place upstream URLs are made: the
        adapter declares the version segment its paths start with (``version_prefix``)."""
        adapter = self.protocol_adapter(upstream.protocol)
        if upstream.style != "standard":
            styles: Mapping[str, UrlStyle] = getattr(adapter, "url_styles", {})
            style = styles.get(upstream.style)
            if style is None:
                raise UpstreamError(f"Upstream {upstream.name!r}: unknown style {upstream.style!r}.")
            styled_path, headers = style.locate(upstream, path, upstream_model)
            url = join_url(upstream.base_url, styled_path)
        else:
            url = join_url(upstream.base_url, path, str(getattr(adapter, "version_prefix", "")))
            headers = adapter.auth_headers(upstream.api_key)
        # No api_key: no empty credential header, so that basic auth from the URL's userinfo applies.
        return url, without_empty_credentials({**headers, **upstream.headers})

    def destination(self, upstream: UpstreamConfig, path: str, upstream_model: str) -> Destination:
        """Where a text call goes (``locate``), with the headers every such call sends: a JSON
        body, the gateway's User-Agent, then the upstream's headers. Kept: the same few recur."""
        key = (upstream.name, path, upstream_model)
        found = self._destinations.get(key)
        if found is None:
            url, headers = self.locate(upstream, path, upstream_model)
            try:
                found = Destination(url, {"Content-Type": "application/json", "User-Agent": USER_AGENT,
                                          **headers})
            except ValueError as exc:
                raise UpstreamError(f"Upstream {upstream.name!r}: {exc}.") from exc
            if len(self._destinations) < LOCATED_MAX:
                self._destinations[key] = found
        return found

    def unservable(self, model_id: str, endpoint: str) -> GatewayError:
        """Why no upstream of ``model_id`` may serve ``endpoint``. A model whose upstreams all speak
        other APIs (a video model on chat completions) is the client's mistake: 400 naming both, a
        status no SDK retries, not an upstream failure. A catalogue model that no upstream lists is
        the config's: 502."""
        protocols = sorted({t.protocol for t in self._found(model_id)})
        if not protocols:
            return UpstreamError(f"No upstream serves the model `{model_id}`.")
        return InvalidRequest(f"The model `{model_id}` cannot be used on {endpoint}: it is served by "
                              f"{', '.join(protocols)} upstreams only.", param="model")

    def can(self, protocol: str, capability: str) -> bool:
        """True when the adapter of ``protocol`` declares ``capability``."""
        adapter = self._adapters.get(protocol)
        return adapter is not None and capability in adapter.capabilities

    def protocol_adapter(self, protocol: str) -> ProtocolAdapter:
        """The adapter of ``protocol``, whatever its kind (a media family narrows it to its own)."""
        adapter = self._adapters.get(protocol)
        if adapter is None:
            raise UpstreamError(f"No adapter is installed for upstream protocol {protocol!r}.")
        return adapter

    def adapter(self, protocol: str) -> UpstreamAdapter:
        """The text adapter of ``protocol``: one that declares a text capability implements the
        whole ``UpstreamAdapter`` (``gateway.relay.translation``)."""
        adapter = self.protocol_adapter(protocol)
        if not adapter.capabilities & TEXT_CAPABILITIES:
            raise UpstreamError(f"Upstream protocol {protocol!r} does not serve text generation.")
        return cast(UpstreamAdapter, adapter)

    @property
    def limits(self) -> LimitsConfig:
        return self._config.limits

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pooled aiohttp session of media tasks' calls (``gateway.tasks.upstream``)."""
        try:
            return self.http.session
        except RuntimeError as exc:
            raise UpstreamError("The upstream client is not started.") from exc
