"""The running gateway: every long-lived service one app instance holds, in one typed object.

Routes reach it through ``request.app.state.gateway``; nothing here is a module-level global.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pluggy

from gateway.accounts.catalogue import Catalogue
from gateway.relay.families import FamilyRegistry
from gateway.runtime.lifecycle import Lifecycle
from gateway.settings.config import Config

if TYPE_CHECKING:
    from gateway.accounts.auth import Authenticator
    from gateway.accounts.metering.meter import Meter
    from gateway.relay.translation import ProtocolAdapter
    from gateway.runtime.secrets_scrub import SecretScrubber
    from gateway.storage.base import Storage
    from gateway.upstream.pool import UpstreamPool


@dataclass
class Gateway:
    config: Config
    plugins: pluggy.PluginManager
    catalogue: Catalogue
    storage: Storage
    auth: Authenticator
    meter: Meter
    upstreams: UpstreamPool
    instance_id: str
    adapters: dict[str, ProtocolAdapter] = field(default_factory=dict)
    # The client-facing wire families (``gateway_families``): envelopes, credentials, body limits.
    families: FamilyRegistry = field(default_factory=lambda: FamilyRegistry(()))
    # Per-app state of plugins (metrics registry, task engine, ...), keyed by plugin name, so that
    # no plugin needs module-level mutable state.
    extensions: dict[str, object] = field(default_factory=dict)
    # Requests in flight and the drain on shutdown (``shutdown_grace_s``).
    lifecycle: Lifecycle = field(default_factory=lambda: Lifecycle(30.0))
    # The upstream secrets kept out of error bodies and logs (of the config now in force).
    scrubber: SecretScrubber | None = None
    # Some plugin follows each call's course (``gateway_call_started`` and the hooks after it,
    # ``gateway.hooks.specs``): set once the startup hooks ran. False: the relay calls none of them.
    observes_calls: bool = False
