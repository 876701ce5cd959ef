"""Runs the media-task engine (``gateway.tasks``) beside the app when any task family is installed:
its poller and callback sender start with the app and stop before the upstream client closes."""

from __future__ import annotations

from gateway.hooks.specs import hookimpl
from gateway.runtime.context import Gateway
from gateway.tasks import engine_of


@hookimpl
async def gateway_startup(gateway: Gateway) -> None:
    engine = engine_of(gateway)
    if engine.families:
        await engine.start()


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    engine = engine_of(gateway)
    if engine.families:
        await engine.stop()
