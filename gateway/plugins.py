"""The plugin manager: built-in translators and plugins first, then third-party entry points.

Built-ins are registered exactly like third-party code, through the same hooks; the only
difference is that their module names are listed here instead of found through the ``gateway``
entry-point group.
"""

from __future__ import annotations

import importlib

import pluggy

from gateway import hookspecs

DEFAULT_PLUGINS: tuple[str, ...] = (
    "gateway.default_hooks",
    "translators.chat",
    "translators.messages",
    "translators.v1beta",
    "translators.responses",
    "plugins.metrics",
    "plugins.account",
)


def make_plugin_manager(*, load_entrypoints: bool = True,
                        extra_plugins: tuple[object, ...] = ()) -> pluggy.PluginManager:
    """A fresh manager: no import-time state, so each app (and each test) builds its own."""
    pm = pluggy.PluginManager("gateway")
    pm.add_hookspecs(hookspecs)
    for name in DEFAULT_PLUGINS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # A built-in that is not written yet is skipped; any other import error is a bug.
            if exc.name != name:
                raise
            continue
        pm.register(module, name)
    if load_entrypoints:
        pm.load_setuptools_entrypoints("gateway")
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm
