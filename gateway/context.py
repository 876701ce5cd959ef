"""The running gateway: every long-lived service one app instance holds, in one typed object.

Routes reach it through ``request.app.state.gateway``; nothing here is a module-level global.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pluggy

from gateway.catalogue import Catalogue
from gateway.config import Config
from gateway.families import FamilyRegistry

if TYPE_CHECKING:
    from gateway.auth import Authenticator
    from gateway.metering.meter import Meter
    from gateway.storage.base import Storage
    from gateway.translation import ProtocolAdapter
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
