"""The plugin manager: built-in translators and plugins first, then third-party entry points.

Built-ins are registered exactly like third-party code, through the same hooks; the only
difference is that their module names are listed here instead of found through the ``gateway``
entry-point group.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar

import pluggy

from gateway.hooks import specs as hookspecs
from gateway.relay.families import FamilyRegistry

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
    "translators.images",
    "translators.videoa",
    "translators.videos",
    "translators.music",
    "plugins.tasks",
    "plugins.metrics",
    "plugins.account",
    "plugins.user_keys",
    "plugins.console",
    "plugins.openapi",
    "plugins.cache",
    "plugins.telemetry",
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


# The one precedence rule of what plugins contribute by name (a family, an upstream protocol's
# adapter): the last registered wins. Built-ins register first, then the entry points, then a
# caller's extra plugins, so a plugin replaces a built-in of the same name. (Routes are Starlette's
# table: the first match serves, and the built-ins come first.)
T = TypeVar("T")


def in_registration_order(answers: list[list[T] | None]) -> Iterator[T]:
    """Every item of a hook's answers, the first registered plugin's first (pluggy answers the
    last-registered first)."""
    for answer in reversed(answers):
        yield from answer or ()


def collect_families(pm: pluggy.PluginManager) -> FamilyRegistry:
    """Every plugin's wire families; of two with one name, the last registered."""
    return FamilyRegistry(in_registration_order(pm.hook.gateway_families()))


def collect_adapters(pm: pluggy.PluginManager) -> dict[str, ProtocolAdapter]:
    """One adapter per upstream protocol: of two for one protocol, the last registered."""
    adapters = in_registration_order(pm.hook.gateway_upstream_adapters())
    return {adapter.protocol: adapter for adapter in adapters}
