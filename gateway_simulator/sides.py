"""The simulator's own plugin system: each API's upstream side is a plugin of the simulator, loaded
only in the simulator process (production code never imports this package or a side).

A side is a module (or object) with a ``gateway_simulator_routes(app)`` implementation marked with
this module's ``hookimpl`` (also exported by ``gateway_simulator.toolkit``). The built-in sides are
the translators' ``simulator`` modules, listed here; a third-party package adds its own with an
entry point in the ``gateway_simulator`` group::

    [project.entry-points.gateway_simulator]
    ollama = "gateway_ollama.simulator"
"""

from __future__ import annotations

import importlib

import pluggy
from aiohttp import web

PROJECT = "gateway_simulator"  # the hook markers' project and the entry-point group
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

BUILTIN_SIDES: tuple[str, ...] = (
    "translators.chat.simulator",
    "translators.messages.simulator",
    "translators.v1beta.simulator",
    "translators.imagetask.simulator",
    "translators.responses.simulator",
    "translators.audio.simulator",
    "translators.images.simulator",
    "translators.videoa.simulator",
    "translators.videos.simulator",
    "translators.music.simulator",
)


class SideSpecs:
    """The simulator's one hook."""

    @hookspec
    def gateway_simulator_routes(self, app: web.Application) -> None:
        """Add the upstream side of an API to the simulator (an aiohttp application): see
        ``gateway_simulator.toolkit`` for how to write one."""


def make_side_manager(*, load_entrypoints: bool = True,
                      extra_plugins: tuple[object, ...] = ()) -> pluggy.PluginManager:
    """A fresh manager of the built-in sides, the ``gateway_simulator`` entry points (unless
    ``load_entrypoints`` is false) and ``extra_plugins``."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(SideSpecs)
    for name in BUILTIN_SIDES:
        pm.register(importlib.import_module(name), name)
    if load_entrypoints:
        pm.load_setuptools_entrypoints(PROJECT)
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


def add_sides(app: web.Application, *, load_entrypoints: bool = True,
              extra_plugins: tuple[object, ...] = ()) -> None:
    """Every side's routes on ``app``."""
    pm = make_side_manager(load_entrypoints=load_entrypoints, extra_plugins=extra_plugins)
    pm.hook.gateway_simulator_routes(app=app)
