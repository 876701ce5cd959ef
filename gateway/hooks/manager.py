"""The plugin manager: built-in translators and plugins first, then third-party entry points.

Built-ins are registered exactly like third-party code, through the same hooks; the only
difference is that their module names are listed here instead of found through the ``gateway``
entry-point group.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import pluggy

from gateway.hooks import specs as hookspecs
from gateway.relay.families import FamilyRegistry, WireFamily

if TYPE_CHECKING:
    from gateway.relay.translation import ProtocolAdapter

DEFAULT_PLUGINS: tuple[str, ...] = (
    "gateway.hooks.defaults",
    "gateway.accounts.ratelimit",
    "gateway.accounts.softlimit",
    "translators.chat",
    "translators.messages",
    "translators.v1beta",
    "translators.imagetask",
    "translators.responses",
    "translators.audio",
    "translators.videoa",
    "translators.videos",
    "translators.music",
    "plugins.tasks",
    "plugins.metrics",
    "plugins.account",
    "plugins.user_keys",
    "plugins.console",
    "plugins.openapi",
)


def make_plugin_manager(*, load_entrypoints: bool = True,
                        extra_plugins: tuple[object, ...] = ()) -> pluggy.PluginManager:
    """A fresh manager: no import-time state, so each app (and each test) builds its own."""
    pm = pluggy.PluginManager("gateway")
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        # A built-in that does not import is a broken install: fail loudly, never serve without it.
        pm.register(importlib.import_module(name), name)
    if load_entrypoints:
        pm.load_setuptools_entrypoints("gateway")
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


def collect_families(pm: pluggy.PluginManager) -> FamilyRegistry:
    """Every plugin's wire families. pluggy answers last-registered first; walking its answers
    backwards registers built-ins first, and on a name clash the first registered one stays."""
    families: list[WireFamily] = []
    for answer in reversed(pm.hook.gateway_families()):
        families.extend(answer or ())
    return FamilyRegistry(families)


def collect_adapters(pm: pluggy.PluginManager) -> dict[str, ProtocolAdapter]:
    """One adapter per upstream protocol; walking pluggy's answers backwards lets a later plugin's
    adapter replace a built-in one."""
    adapters: dict[str, ProtocolAdapter] = {}
    for answer in reversed(pm.hook.gateway_upstream_adapters()):
        for adapter in answer or ():
            adapters[adapter.protocol] = adapter
    return adapters
