"""The app factory: plugins -> Gateway -> route table -> middleware -> lifespan.

Nothing here runs at import time; every app (one per worker process, one per test) builds its own
plugin manager and services, so no state is shared through module globals.
"""

from __future__ import annotations

import contextlib
import inspect
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import pluggy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.accounts.auth import Authenticator
from gateway.accounts.catalogue import Catalogue
from gateway.accounts.metering.meter import Meter
from gateway.accounts.metering.retention import RETENTION, LogRetention
from gateway.accounts.records import RequestLog
from gateway.admin.api import admin_routes
from gateway.admin.manage import admin_manage_routes, unwatch_resets, watch_resets
from gateway.admin.ops import admin_ops_routes
from gateway.admin.reload import reload_routes
from gateway.admin.usage import usage_routes
from gateway.edge.http import json_response
from gateway.edge.middleware import middleware_stack
from gateway.edge.openapi import documented
from gateway.edge.readiness import readyz
from gateway.edge.routing import ExactPathDispatch, lean_handlers
from gateway.hooks.manager import collect_adapters, collect_families, make_plugin_manager
from gateway.relay.offload import BUDGET_BODIES, BodyWorkBudget
from gateway.runtime import tuning
from gateway.runtime.context import Gateway
from gateway.runtime.lifecycle import Lifecycle
from gateway.runtime.reload import reloader_of, unwatch_sighup, watch_sighup
from gateway.runtime.workers import register_worker, unregister_worker
from gateway.settings.config import Config, check_protocols
from gateway.storage import open_storage
from gateway.upstream.pool import UpstreamPool


def create_app(config: Config, *, extra_plugins: Sequence[object] = (),
               load_entrypoints: bool = True) -> Starlette:
    """A ready-to-serve app for ``config``. ``extra_plugins`` are registered after the built-ins
    and entry points (tests use it for throw-away plugins)."""
    pm = make_plugin_manager(load_entrypoints=load_entrypoints, extra_plugins=tuple(extra_plugins))
    adapters = collect_adapters(pm)
    check_protocols(config, adapters)
    families = collect_families(pm)
    storage = open_storage(config.database)
    instance_id = uuid.uuid4().hex

    def on_finished(record: RequestLog) -> None:
        notify_finished(gateway, record)

    gateway = Gateway(
        config=config,
        plugins=pm,
        catalogue=Catalogue(config),
        storage=storage,
        auth=Authenticator(storage, config, config.redis, families=families),
        meter=Meter(storage, instance_id, on_finished=on_finished,
                    batch_max=config.metering.batch_max, flush_interval_s=config.metering.flush_interval_s,
                    heartbeat_s=config.metering.heartbeat_s, stale_after_s=config.metering.stale_after_s,
                    refusals_max=config.logs.refusal_queue_max),
        upstreams=UpstreamPool(config, adapters),
        instance_id=instance_id,
        adapters=adapters,
        families=families,
        lifecycle=Lifecycle(config.shutdown_grace_s),
    )
    # Large bodies are decoded and counted off the event loop, within a byte budget.
    tuning.pin_mmap_threshold()
    body_work = BodyWorkBudget(BUDGET_BODIES * config.limits.json_body_bytes, config.limits.json_max_elements)
    app = GatewayApp(
        routes=[*core_routes(), *collect_routes(pm, gateway)],
        middleware=middleware_stack(config, families),
        lifespan=_lifespan(gateway, body_work),
    )
    # No 307 to the path with(out) its trailing slash: Starlette builds that Location from the
    # client's Host header, before any route authenticates. An unknown path is a 404 in its
    # family's envelope, like any other.
    app.router.redirect_slashes = False
    app.state.body_work_budget = body_work
    app.state.gateway = gateway
    app.lifecycle = gateway.lifecycle
    return app


class GatewayApp(Starlette):
    """Starlette without its two exception layers (ServerErrorMiddleware, outermost, and
    ExceptionMiddleware, innermost): ``EdgeMiddleware``, outermost here, answers whatever escapes
    the routes in the path's family envelope (routing's 404 and 405 included), and each of those
    layers would only wrap ``send`` once more on every request. Fixed paths are dispatched by dict
    lookup, and function endpoints run without Starlette's per-route exception layer
    (``gateway.edge.routing``)."""

    lifecycle: Lifecycle | None = None  # the gateway's: requests in flight, for the drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lifecycle = self.lifecycle
        if lifecycle is None or scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        lifecycle.request_started()
        try:
            await super().__call__(scope, receive, send)
        finally:
            lifecycle.request_ended()

    def build_middleware_stack(self) -> ASGIApp:
        lean_handlers(self.router.routes)
        app: ASGIApp = ExactPathDispatch(self.router)
        for cls, args, kwargs in reversed(self.user_middleware):
            app = cls(app, *args, **kwargs)
        return app


def collect_routes(pm: pluggy.PluginManager, gateway: Gateway) -> list[BaseRoute]:
    """Every plugin's routes, in registration order (built-ins first), so that on a clash the
    built-in route is the one matched."""
    routes: list[BaseRoute] = []
    for answer in reversed(pm.hook.gateway_routes(gateway=gateway)):
        routes.extend(answer or ())
    return routes


def core_routes() -> list[BaseRoute]:
    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"]),
            *admin_routes(), *admin_ops_routes(), *admin_manage_routes(), *usage_routes(), *reload_routes()]


@documented("Health check", public=True)
async def healthz(request: Request) -> Response:
    return json_response({"status": "ok"})


def notify_finished(gateway: Gateway, record: RequestLog) -> None:
    """The Meter's ``on_finished`` (which logs and survives a failing subscriber)."""
    gateway.plugins.hook.gateway_request_finished(gateway=gateway, log=record)


async def _await_all(results: Iterable[Any]) -> None:
    for result in results:
        if inspect.isawaitable(result):
            await result


async def _shutdown_hooks(gateway: Gateway) -> None:
    await _await_all(gateway.plugins.hook.gateway_shutdown(gateway=gateway))


def _lifespan(gateway: Gateway, body_work: BodyWorkBudget) -> Any:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Started in order, stopped in reverse (also when a later start fails): by the time the
        # Meter flushes, the upstream pool is closed and no request can add to it.
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(body_work.aclose)
            await gateway.storage.open()
            stack.push_async_callback(gateway.storage.close)
            await gateway.auth.start()
            stack.push_async_callback(gateway.auth.stop)
            await gateway.meter.start()
            stack.push_async_callback(gateway.meter.stop)
            retention = LogRetention(gateway.storage, gateway.config.logs, gateway.instance_id)
            gateway.extensions[RETENTION] = retention
            retention.start()
            stack.push_async_callback(retention.stop)
            await gateway.upstreams.start()
            stack.push_async_callback(gateway.upstreams.stop)
            # Shutdown hooks run first on the way out; registered before startup hooks run so
            # that a plugin whose startup half-failed still gets to clean up.
            stack.push_async_callback(_shutdown_hooks, gateway)
            await _await_all(gateway.plugins.hook.gateway_startup(gateway=gateway))
            # A plugin may register the call hooks' implementation at startup (plugins.telemetry).
            gateway.observes_calls = bool(gateway.plugins.hook.gateway_call_started.get_hookimpls())
            # First of all on the way out: calls in flight finish (or streams end) within the
            # grace, while everything they need still runs.
            stack.push_async_callback(gateway.lifecycle.drain)
            stack.callback(gateway.lifecycle.unwatch_signals)
            if gateway.lifecycle.chain_signals:  # served by ``gateway serve``
                gateway.lifecycle.watch_signals()
                reloader = reloader_of(gateway)
                if reloader is not None:  # SIGHUP reloads; other workers can find this one
                    watch_sighup(gateway, reloader)
                    stack.callback(unwatch_sighup)
                    watch_resets(gateway)  # before registering: the signal would end the process
                    stack.callback(unwatch_resets)
                    register_worker()
                    stack.callback(unregister_worker)
                    await reloader.catch_up(gateway)
            yield

    return lifespan
