"""Cross-cutting concerns as pure ASGI middleware (no BaseHTTPMiddleware: it buffers and copies).

Order, outermost first (``middleware_stack``)::

    EdgeMiddleware          one wrapper of ``send`` for everything a response gets on its way out
                            (X-Service-Request-Id, the x-ratelimit-* headers), the request's
                            ``RequestScope``, the /metrics counters, the access log line, and the
                            guard that answers an exception no route handled in the family's envelope
    BodyLimitMiddleware     413 request_too_large, from Content-Length or by counting the stream
    BodyDeadlineMiddleware  408 request_timeout, a body that stalls (``gateway.edge.deadlines``)

Each class is stateless per request: everything it needs is given at construction. The edge
concerns are one layer, not five: every layer that wraps ``send`` costs a closure, a call and a
header-list copy per message of every request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.accounts.keys import Network, client_ip_from, parse_networks
from gateway.accounts.ratelimit_headers import rate_headers
from gateway.edge.deadlines import BodyDeadlineMiddleware
from gateway.edge.http import (
    GATEWAY_SCOPE_KEY,
    JSON_MEDIA_TYPE,
    REQUEST_ID_HEADER,
    handle_unexpected,
    new_request_id,
)
from gateway.edge.refusals import is_refusal, refusal_row
from gateway.edge.wrong_paths import CONSOLE_PATH, served, wrong_path
from gateway.relay.families import DEFAULT_FAMILY, FamilyRegistry
from gateway.relay.offload import BUDGET_SCOPE_KEY
from gateway.runtime.errors import (
    GatewayError,
    MethodNotAllowed,
    NotFound,
    RequestTooLarge,
    ServiceUnavailable,
)
from gateway.runtime.observe import (
    STATE_KEY,
    HttpStats,
    RequestScope,
    call_fields,
    close_scope,
    http_stats,
    note_error,
    open_scope,
)
from gateway.runtime.secrets_scrub import SecretScrubber, redact_query
from gateway.settings.config import Config

if TYPE_CHECKING:
    from gateway.runtime.context import Gateway

access_log = logging.getLogger("gateway.access")

_REQUEST_ID_HEADER = REQUEST_ID_HEADER.lower().encode("latin-1")
_CONNECTION_CLOSE = (b"connection", b"close")
_RETRY_SOON = (b"retry-after", str(ServiceUnavailable.retry_after_s).encode("ascii"))
# How long a refused upload is read on after its answer (said ``Connection: close``): a client
# may stop sending and keep its socket, and granian then reports neither the end nor a disconnect.
DISCARD_DEADLINE_S = 1.0
PATH_CACHE_MAX = 1024  # paths whose family answers are remembered; later ones are computed each time


def loggable_path(scope: Scope) -> str:
    """The path and query of a request with credentials in the query removed."""
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{scope['path']}?{redact_query(query)}" if query else scope["path"]


class EdgeMiddleware:
    """Everything at the edge of a request, in one layer:

    * the request id: ``req_<32 hex>`` in ``scope["state"]["request_id"]`` and as
      X-Service-Request-Id on whatever response answers the request (errors of any layer included);
    * the request's ``RequestScope`` (``gateway.runtime.observe``; also ``scope["state"]["observe"]``),
      where ``admit_call`` leaves its rate-limit verdict, whose x-ratelimit-* headers (and
      Retry-After) the response then gets, where the metered call leaves its record, and where
      a body deadline asks for ``Connection: close`` (``gateway.edge.deadlines``);
    * the /metrics counters (``HttpStats``): every request by method, route template
      (``unmatched`` for a path no route knows) and status, refusals included, and those in flight;
    * the request-log row of a refused request that made no metered call (``gateway.edge.refusals``,
      CONTRACT 6a), queued once the answer is sent;
    * the access log (when on): one JSON line after the response ended, so it never delays it:
      method, path (credentials redacted), status, duration, request id, client IP and the fields
      of the metered call or refusal (model, key name, stream flag, time to first byte, error code);
    * the one exception layer: an exception that escaped the route is answered in the envelope
      of the family that owns the path (the router's 404 and 405 as ``not_found`` and
      ``method_not_allowed``, through ``gateway_handle_exception`` for anything that is not a
      GatewayError or the router's). Once a response has
      started nothing can be sent instead, so the exception goes on to the server, which closes
      the connection.
    """

    def __init__(self, app: ASGIApp, families: FamilyRegistry, access_log_on: bool = False,
                 trusted_proxies: Sequence[Network] = ()) -> None:
        self.app = app
        self.families = families
        self.access_log_on = access_log_on
        self.trusted = tuple(trusted_proxies)
        self._stats: HttpStats | None = None  # the app's, found on the first request
        self._scrubber: SecretScrubber | None = None  # of the app's config, made on the first request
        self._gateway: Gateway | None = None  # the app's, found on the first request
        self._body_work: object = None  # the app's body-work budget (``relay.offload``), found with it

    def _http_stats(self, scope: Scope) -> HttpStats:
        if self._stats is None:
            state = getattr(scope.get("app"), "state", None)
            gateway = getattr(state, "gateway", None)
            if gateway is None:  # a bare app (unit test): counted nowhere
                return HttpStats()
            self._gateway = gateway
            self._body_work = getattr(state, "body_work_budget", None)
            self._stats = http_stats(gateway)
            self._scrubber = SecretScrubber.of_config(gateway.config)
        return self._stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        families = self.families
        if (alias := families.alias(scope["path"])) is not None:  # an SDK's base URL without its path
            scope["path"] = alias
        # A base URL with the version its SDK adds (answered before a family's own catch-all 404)
        doubled = scope["path"].startswith(families.doubled_starts)
        rid = new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = rid
        request_scope, token = open_scope(rid)
        request_scope.headers = scope["headers"]
        state[STATE_KEY] = request_scope
        id_header = (_REQUEST_ID_HEADER, rid.encode("ascii"))
        stats = self._http_stats(scope)
        if self._gateway is not None:  # for ``get_gateway`` and ``budget_for``: no app.state lookups
            scope[GATEWAY_SCOPE_KEY] = self._gateway
            scope[BUDGET_SCOPE_KEY] = self._body_work
        # the gateway's, which a config reload replaces (a bare app's: the one made here)
        reloaded = self._gateway.scrubber if self._gateway is not None else None
        request_scope.scrubber = reloaded if reloaded is not None else self._scrubber
        status = 0

        async def edge_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", ()))
                headers.append(id_header)
                if request_scope.verdict is not None:
                    headers += rate_headers(request_scope.verdict)
                if request_scope.close_connection:
                    headers.append(_CONNECTION_CLOSE)
                if status == ServiceUnavailable.status and not any(k == b"retry-after" for k, _ in headers):
                    headers.append(_RETRY_SOON)  # every 503 of the gateway's own: come back shortly
                message["headers"] = headers
            await send(message)

        stats.in_flight += 1
        try:
            try:
                if doubled:
                    raise HTTPException(404)  # the guard says which base URL to use
                await self.app(scope, receive, edge_send)
            except Exception as exc:
                if status:
                    raise
                await self._guard(exc, scope, receive, edge_send)
        except asyncio.CancelledError:
            status = status or 499  # the client went away before an answer (nginx's convention)
            raise
        except BaseException:
            status = status or 500
            raise
        finally:
            stats.in_flight -= 1
            route = getattr(scope.get("route"), "path", None)
            stats.observe(scope["method"], route if isinstance(route, str) else "unmatched", status or 499)
            close_scope(token)
            if is_refusal(status or 499, scope["path"], request_scope):
                self._log_refusal(scope, request_scope, status, started)
            if self.access_log_on and access_log.isEnabledFor(logging.INFO):
                access_log.info(orjson.dumps({
                    "method": scope["method"],
                    "path": loggable_path(scope),
                    "status": status or 499,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    "request_id": rid,
                    "client_ip": self._client_ip(scope),
                    **call_fields(scope),  # model, key, user, upstream, tokens, cost, outcome of its call
                }).decode())

    def _log_refusal(self, scope: Scope, request_scope: RequestScope, status: int, started: float) -> None:
        """Queue the refused request's row; it also becomes the access-log line's record."""
        if self._gateway is None:  # a bare app (unit test): no meter
            return
        row = refusal_row(request_scope, path=scope["path"], status=status, started=started,
                          client_ip=self._client_ip(scope), families=self.families)
        request_scope.record = row
        self._gateway.meter.refused(row)

    async def _guard(self, exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
        response: Response
        if isinstance(exc, HTTPException) and exc.status_code == 404 and (
                (hint := wrong_path(scope, self.families)) is not None):  # a base URL users get wrong
            response = _envelope(self.families, hint.meant, NotFound(hint.message))
        elif isinstance(exc, HTTPException) and exc.status_code == 404 and _console_home(scope):
            response = RedirectResponse(CONSOLE_PATH, status_code=302)  # relative: not from Host
        elif isinstance(exc, HTTPException):  # the router's: an unknown path, a wrong method
            response = _envelope(self.families, scope["path"], routing_error(scope, exc))
            if exc.headers:
                response.headers.update(exc.headers)  # a 405's Allow
        elif isinstance(exc, GatewayError):
            response = _envelope(self.families, scope["path"], exc)
        else:
            owner = self.families.for_path(scope["path"])
            family = owner.name if owner is not None else DEFAULT_FAMILY
            response = handle_unexpected(Request(scope, receive), exc, family)
        await response(scope, receive, send)

    def _client_ip(self, scope: Scope) -> str:
        client = scope.get("client")
        peer = client[0] if client else None
        forwarded = None
        if self.trusted:
            for name, value in scope["headers"]:
                if name == b"x-forwarded-for":
                    forwarded = value.decode("latin-1")
        return client_ip_from(peer, forwarded, self.trusted)


def _console_home(scope: Scope) -> bool:
    """``GET /`` when the web console is served: a browser pointed at the gateway lands there."""
    return scope["path"] == "/" and scope["method"] in ("GET", "HEAD") and served(scope, CONSOLE_PATH)


def routing_error(scope: Scope, exc: HTTPException) -> GatewayError:
    """The router's refusal of a request as the gateway's error (answered in the envelope of the
    path's family)."""
    method, path = scope["method"], scope["path"]
    if exc.status_code == 404:
        return NotFound(f"Unknown request URL: {method} {path}.")
    if exc.status_code == 405:
        return MethodNotAllowed(f"Method {method} is not allowed for {path}.")
    return GatewayError(str(exc.detail), status=exc.status_code, code="http_error")


def _envelope(families: FamilyRegistry, path: str, err: GatewayError) -> Response:
    note_error(err.code, err.message)
    return Response(families.render_for_path(path, err), status_code=err.status, media_type=JSON_MEDIA_TYPE)


class BodyLimitMiddleware:
    """413 ``request_too_large``: at once when Content-Length is over the path's limit (the owning
    family's ``body_limit``, else ``limits.json_body_bytes``), otherwise by counting the body as it
    is received (chunked uploads) and raising RequestTooLarge from ``receive``, which the route's
    ``endpoint`` wrapper (or ``EdgeMiddleware``'s guard) turns into the envelope."""

    def __init__(self, app: ASGIApp, config: Config, families: FamilyRegistry) -> None:
        self.app = app
        self.limits = config.limits
        self.families = families
        self._limits: dict[str, int] = {}  # path -> its limit (asking every family is a loop)

    def _limit(self, path: str) -> int:
        limit = self._limits.get(path)
        if limit is None:
            limit = self.families.body_limit(path, self.limits)
            if len(self._limits) < PATH_CACHE_MAX:
                self._limits[path] = limit
        return limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            response = _envelope(self.families, scope["path"], _too_large(limit))
            response.headers["connection"] = "close"  # the body is never read: end the connection
            await response(scope, receive, send)
            await _discard_rest(receive)
            return
        if declared is not None:  # the server holds the body to its Content-Length
            await self.app(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _too_large(limit)
            return message

        async def closing_send(message: Message) -> None:
            # Once over the limit the rest of the upload is never read: close after the answer.
            if message["type"] == "http.response.start" and received > limit:
                message["headers"] = [*message.get("headers", ()), (b"connection", b"close")]
            await send(message)

        await self.app(scope, counting_receive, closing_send)
        if received > limit:
            await _discard_rest(receive)


async def _discard_rest(receive: Receive) -> None:
    """Consume what the server queued of a refused body until it reports the end or the
    disconnect (prompt: the answer said ``Connection: close``). Hypercorn's per-request queue is
    bounded and its reader waits for room, so an app that stops reading would leave the
    connection's task hanging until the graceful-shutdown timeout. Bounded by
    ``DISCARD_DEADLINE_S``: the server ends the connection when the app returns."""
    try:
        async with asyncio.timeout(DISCARD_DEADLINE_S):
            while True:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
    except TimeoutError:
        return


def _too_large(limit: int) -> RequestTooLarge:
    return RequestTooLarge(f"The request body is larger than the limit of {limit} bytes for this endpoint.")


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def middleware_stack(config: Config, families: FamilyRegistry) -> list[Middleware]:
    """The middleware of ``create_app``, outermost first."""
    return [Middleware(EdgeMiddleware, families=families, access_log_on=config.logging.access_log,
                       trusted_proxies=parse_networks(config.trusted_proxies)),
            Middleware(BodyLimitMiddleware, config=config, families=families),
            Middleware(BodyDeadlineMiddleware, limits=config.limits)]
