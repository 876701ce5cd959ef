"""Runs the media-task engine (``gateway.tasks``) beside the app when any task family is installed:
its poller and callback sender start with the app and stop before the upstream client closes. Also
serves the result files of every family's tasks (``GET /v1/media/...``, ``media_routes``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import Gateway, hookimpl
from gateway.api.tasks import engine_of, media_routes

if TYPE_CHECKING:
    from starlette.routing import BaseRoute


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return media_routes()


@hookimpl
async def gateway_startup(gateway: Gateway) -> None:
    engine = engine_of(gateway)
    if engine.families:
        await engine.start()


@hookimpl
def gateway_config_reloaded(gateway: Gateway) -> None:
    engine_of(gateway).reconfigure(gateway.config)


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    engine = engine_of(gateway)
    if engine.families:
        await engine.stop()
