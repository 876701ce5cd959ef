"""How a simulator side plugs in: ``SimVendor`` (credential, headers, error envelope), ``endpoint``
(the wrapper every side's handler goes through) and ``add_route`` (paths several sides share).

A side is a ``SimVendor`` subclass plus handlers ``async def handler(ctx: Ctx) -> StreamResponse``.
The side registers each handler from its ``gateway_simulator_routes(app)`` hook::

    add_route(app, "POST", "/things", endpoint(MY_VENDOR, create_thing))

``endpoint`` does, for every side alike: take the credential the vendor extracts (401 when there is
none), let the vendor check its required headers (400), parse a POST body as a JSON object (400),
apply the ``fail`` and ``hang`` fault options, and map ``BadRequest`` and a handler tripping over a
body of the wrong shape to a 400; every error is written in the vendor's own envelope.

Shared paths: one aiohttp route exists per (method, path) and dispatches to the first side whose
``claims`` predicate is true for the request, in registration order, else to the side that
registered the path without a predicate (the fallback; at most one per path), else a 404. So two
sides whose APIs both have ``GET /items`` tell their callers apart by headers, e.g. the second
registers ``add_route(app, "GET", "/items", endpoint(B, list_items), claims=has_b_header)`` and the
first is the fallback. A predicate sees the matched ``request.match_info``, so the same pattern can
be split on the path as well. Predicates should be disjoint; where they are not, the side
registered first wins (built-in hooks run last-registered first, as pluggy calls them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from gateway_simulator.context import SETTINGS_KEY, BadRequest, Ctx, Faults, StreamCut, json_response
from gateway_simulator.textgen import count_tokens

Handler = Callable[[Ctx], Awaitable[web.StreamResponse]]
WebHandler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Claim = Callable[[web.Request], bool]
ModelOf = Callable[[web.Request, dict[str, Any]], str]


class SimVendor:
    """One upstream API the simulator impersonates. Subclass it and override what differs; only
    ``error_body`` has no sensible default. ``name`` shows in logs and 404 answers."""

    name: str = "side"

    def extract_key(self, request: web.Request) -> str:
        """The caller's credential ("" when there is none: answered 401). Default: a bearer token."""
        return bearer_token(request)

    def check_headers(self, request: web.Request) -> str | None:
        """The message of a 400 when a header the API requires is missing or wrong, else None."""
        return None

    def error_body(self, status: int, message: str) -> Any:
        """The JSON body of an error with this HTTP status, in the API's own envelope."""
        raise NotImplementedError

    def stamp(self, request: web.Request, response: web.StreamResponse) -> None:
        """Add the API's own response headers (request ids, ...) before the response is sent."""

    def context_too_long(self, tokens: int, window: int) -> tuple[int, Any]:
        """(status, body) of the API's refusal of an input over the model's context window (the
        ``window<N>`` fault option). Default: a 400 in the API's envelope."""
        return 400, self.error_body(400, f"input of {tokens} tokens is over the context window of {window}")


VENDOR_KEY = web.RequestKey("sim_vendor", SimVendor)


def bearer_token(request: web.Request) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (RFC 6750), or ""."""
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


def body_model(_: web.Request, body: dict[str, Any]) -> str:
    """The default ``model_of``: the body's ``model`` string."""
    model = body.get("model")
    return model if isinstance(model, str) else ""


def endpoint(vendor: SimVendor, handler: Handler, model_of: ModelOf = body_model) -> WebHandler:
    """Wrap a side's handler with credential and header checks, JSON parsing, fault injection and
    error mapping (all in ``vendor``'s envelope). ``model_of`` finds the model id (fault options
    are read from it as well as from the credential)."""

    def error(status: int, message: str) -> web.Response:
        return json_response(vendor.error_body(status, message), status=status)

    async def wrapped(request: web.Request) -> web.StreamResponse:
        request[VENDOR_KEY] = vendor
        key = vendor.extract_key(request)
        if not key:
            return error(401, "missing API key (simulator accepts any non-empty key)")
        problem = vendor.check_headers(request)
        if problem is not None:
            return error(400, problem)
        body: dict[str, Any] = {}
        if request.method == "POST":
            try:
                parsed = orjson.loads(await request.read())
            except orjson.JSONDecodeError:
                return error(400, "request body is not valid JSON")
            if not isinstance(parsed, dict):
                return error(400, "request body must be a JSON object")
            body = parsed
        model = model_of(request, body)
        ctx = Ctx(request, vendor, request.app[SETTINGS_KEY], Faults.parse(key, model), body, model)
        if ctx.faults.hang:
            await asyncio.sleep(3600)
        if ctx.faults.fail is not None:
            if ctx.ttft_s:
                await asyncio.sleep(ctx.ttft_s)
            return ctx.error(ctx.faults.fail, "simulated failure")
        if ctx.faults.window is not None and request.method == "POST":
            tokens = count_tokens(orjson.dumps(body).decode())
            if tokens > ctx.faults.window:
                status, refusal = vendor.context_too_long(tokens, ctx.faults.window)
                return json_response(refusal, status=status)
        try:
            return await handler(ctx)
        except BadRequest as exc:
            if ctx.resp is not None:
                raise
            return ctx.error(400, str(exc))
        except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
            # A body of the wrong shape that the handler tripped over: a real API answers 400.
            if ctx.resp is not None:
                raise
            return ctx.error(400, f"malformed request ({type(exc).__name__})")
        except StreamCut:
            ctx.abort()
            return ctx.stream()

    return wrapped


@dataclass
class SharedRoute:
    """The one aiohttp handler of a (method, path): the claims, tried in order, then the fallback."""

    method: str
    path: str
    claimed: list[tuple[Claim, WebHandler]] = field(default_factory=list)
    fallback: WebHandler | None = None

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        for claim, handler in self.claimed:
            if claim(request):
                return await handler(request)
        if self.fallback is not None:
            return await self.fallback(request)
        message = f"no simulator side serves {request.method} {request.path} for this request"
        return json_response({"error": {"code": 404, "message": message}}, status=404)


class RouteTable:
    """Every (method, path) a side registered, so a second side can share it."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], SharedRoute] = {}


ROUTES_KEY = web.AppKey("sim_routes", RouteTable)


def add_route(
    app: web.Application, method: str, path: str, handler: WebHandler, *, claims: Claim | None = None
) -> None:
    """Serve ``method path`` (an aiohttp path pattern) with ``handler``, usually an ``endpoint``.

    Without ``claims`` the handler is the path's fallback (a second fallback for the same method
    and path is a ``ValueError``: two sides would silently fight over it); with ``claims`` it
    serves the requests the predicate accepts. A GET route answers HEAD as well."""
    method = method.upper()
    if ROUTES_KEY not in app:
        app[ROUTES_KEY] = RouteTable()
    table = app[ROUTES_KEY]
    shared = table.routes.get((method, path))
    if shared is None:
        shared = table.routes[(method, path)] = SharedRoute(method, path)
        if method == "GET":
            app.router.add_get(path, shared.dispatch)
        else:
            app.router.add_route(method, path, shared.dispatch)
    if claims is not None:
        shared.claimed.append((claims, handler))
    elif shared.fallback is not None:
        raise ValueError(f"{method} {path} already has a simulator side without a claims predicate")
    else:
        shared.fallback = handler
