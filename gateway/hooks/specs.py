"""Every extension point of the gateway, declared once.

Built-in translators and plugins implement these exactly as third-party plugins do (see
``gateway.hooks.manager``); plugins import ``hookimpl`` from ``gateway.api``. The simulator's side
of a family is not a hook of the gateway: it is the simulator's own (``gateway_simulator.sides``).
Hook names start with ``gateway_``. Hooks are synchronous; a hook that has asynchronous work
returns an awaitable, which the caller awaits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from gateway.hooks.markers import hookimpl as hookimpl
from gateway.hooks.markers import hookspec

if TYPE_CHECKING:
    import argparse

    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute

    from gateway.accounts.records import Principal, RequestLog
    from gateway.relay.call import CallContext
    from gateway.relay.canonical import ChatResponse
    from gateway.relay.families import WireFamily
    from gateway.relay.replay import CacheLookup
    from gateway.relay.translation import ClientCall, ProtocolAdapter
    from gateway.runtime.context import Gateway
    from gateway.storage.rows import SoftLimitCrossing
    from gateway.tasks.family import TaskFamily
    from gateway.upstream.pool import Target


@hookspec
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    """Starlette routes this plugin serves (client-facing endpoints of a wire family, account
    endpoints, ...). Called once at start-up; the routes of every plugin are joined in one table.
    A route's endpoint reaches the running gateway through ``request.app.state.gateway``."""


@hookspec
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    """Adapters that speak an upstream ``protocol``: they turn the canonical request into that
    protocol's wire request and its answers back into canonical form. Each declares its
    ``protocol`` (the values ``upstreams[].protocol`` may take) and its ``capabilities`` (the kinds
    of work routing may send it; "generate"/"embed" make it a text ``UpstreamAdapter``). One
    adapter per protocol; of two, the last registered wins (``gateway.hooks.manager``)."""


@hookspec
def gateway_startup(gateway: Gateway) -> Awaitable[None] | None:
    """Called when the app starts, after storage is open and before the first request."""


@hookspec
def gateway_shutdown(gateway: Gateway) -> Awaitable[None] | None:
    """Called on graceful shutdown, after in-flight requests finished and before storage closes."""


@hookspec
def gateway_config_reloaded(gateway: Gateway) -> None:
    """The config file was reloaded (SIGHUP, ``gateway reload``, ``POST /admin/reload``):
    ``gateway.config`` is the new one. Refresh what was built from the old one; calls in flight
    keep theirs. Must not block."""


@hookspec
def gateway_request_finished(gateway: Gateway, log: RequestLog) -> None:
    """A metered call ended (any outcome). ``log`` is the typed record that is also written to the
    request log; subscribers (metrics, billing exports, audit trails) must not block."""


@hookspec
def gateway_soft_limit_reached(gateway: Gateway, crossing: SoftLimitCrossing) -> None:
    """A key's spent (``crossing.scope == "key"``) or a user's used total (``"user"``) reached
    its ``soft_limit_usd`` (``crossing.soft_limit_nano``, ``crossing.spent_nano``; nano-USD). Fired
    once per crossing across all replicas, after the settlement that crossed it; nothing is refused.
    Subscribers (mail, webhooks, the metrics plugin) must not block: schedule slow work."""


@hookspec(firstresult=True)
def gateway_handle_exception(request: Request, exc: BaseException, family: str) -> Response | None:
    """Turn an unexpected exception into a response. The built-in implementation (trylast)
    answers 500 in the family's envelope without a stack trace; a plugin may answer first."""


@hookspec
def gateway_cli_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add sub-commands to the ``gateway`` command line. Set ``func`` on the parser with
    ``set_defaults(func=...)``; it receives the parsed namespace and returns an exit code."""


@hookspec
def gateway_families() -> list[WireFamily]:
    """The client-facing wire families this plugin adds (``gateway.relay.families.WireFamily``): the
    paths each owns, where its caller's credential sits and which headers it requires, its error
    envelope and its body limits. The core asks these; it names no family itself. Of two families
    with one name, the last registered wins (``gateway.hooks.manager``)."""


@hookspec
def gateway_task_families() -> list[TaskFamily]:
    """The asynchronous task families this plugin adds (``gateway.tasks.family.TaskFamily``): how
    the task engine polls their upstreams (in batches where the upstream allows), what their
    statuses mean (queued, running, succeeded, failed) and what their callbacks carry. The engine
    (``gateway.tasks``) keeps the tasks, polls them, charges or refunds them exactly once and sends
    the callbacks; the family's routes submit through it and render the tasks it stores."""


@hookspec(firstresult=True)
def gateway_cache_lookup(gateway: Gateway, request: Request, principal: Principal, call: ClientCall,
                         family: str) -> Awaitable[CacheLookup | None] | None:
    """The response cache's verdict on a generation (``gateway.relay.replay.CacheLookup``), asked
    once the caller is authenticated and the model allowed, before anything is held or any upstream
    asked: a kept answer to serve (a hit), or a miss whose answer is to be kept or not; None when
    no cache serves the call. The first plugin that answers is the cache (the built-in
    ``plugins.cache``)."""


@hookspec
def gateway_cache_store(gateway: Gateway, lookup: CacheLookup, user_id: int, response: ChatResponse) -> None:
    """A generation the cache missed (``lookup``) was answered complete and charged: ``response``
    is its canonical answer (``response.model`` the model that served it), to keep for the user
    ``user_id``. Not called for errors, cut streams or ``no-store`` requests. Must not block:
    schedule the write."""


# The four hooks of a call's course, for tracing (the built-in ``plugins.telemetry``). They are
# called only when some plugin implements ``gateway_call_started`` once the startup hooks ran
# (``Gateway.observes_calls``): a gateway that traces nothing pays nothing for them.


@hookspec
def gateway_call_started(ctx: CallContext, headers: Mapping[str, str]) -> None:
    """A metered call was admitted (``ctx``: its caller, model, family, route, request id; its
    ``arrived`` time). ``headers``: the client request's headers (a W3C ``traceparent`` to
    continue). ``ctx.trace`` is the implementation's slot for what it keeps of the call. Must not
    block."""


@hookspec
def gateway_attempt_started(ctx: CallContext, target: Target, number: int, headers: dict[str, str]) -> None:
    """The call's ``number``-th upstream attempt (from 1, across failover and fallbacks) is about to
    be sent to ``target``. ``headers``: the attempt's own request headers, which an implementation
    may add to (a ``traceparent`` passed upstream). Must not block."""


@hookspec
def gateway_attempt_ended(ctx: CallContext, target: Target, status: int | None, error: str | None) -> None:
    """The attempt on ``target`` is decided: answered (``error`` None; for a stream, its first chunk
    read, the rest relayed before ``gateway_call_finished``), refused (``status``: the upstream's
    HTTP status) or failed (``error``: why, ``status`` None when nothing answered)."""


@hookspec
def gateway_call_finished(ctx: CallContext, log: RequestLog) -> None:
    """The call ended, once (``CallContext.finish``): ``log`` is its request-log record (status,
    outcome, usage, charge; ``log.model`` the model that served it). Must not block."""
