"""Route dispatch without a walk over every route, and route handlers without a second error layer.

Starlette's ``Router`` tries each route's regular expression in order, so a request for the 17th
route pays for 17 matches; most of the gateway's paths are fixed strings, which
``ExactPathDispatch`` finds with one dict lookup. It answers exactly what
the ``Router`` would: a path goes into its table only when no earlier route (in the Router's order)
can match that path, and anything it does not match fully (a wrong method, a templated path, a
``root_path``) goes on to the ``Router``, whose 404/405 answers stay the only ones.

``lean_handlers`` replaces Starlette's ``request_response`` wrapper of a function endpoint (which
catches exceptions a second time and wraps ``send`` once more) with a bare call: every exception a
route raises still reaches ``EdgeMiddleware``'s guard, which answers it in the family's envelope.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

_PROBE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


def _plain_path(route: BaseRoute) -> str | None:
    path = getattr(route, "path", None)
    if isinstance(route, Route) and isinstance(path, str) and "{" not in path:
        return path
    return None


def _can_match(route: BaseRoute, path: str) -> bool:
    for method in _PROBE_METHODS:
        probe: Scope = {"type": "http", "path": path, "root_path": "", "method": method, "headers": []}
        if route.matches(probe)[0] is not Match.NONE:
            return True
    return False


def exact_path_table(routes: Sequence[BaseRoute]) -> dict[str, tuple[Route, ...]]:
    """Each fixed path and its routes, in order, up to the first route of another path (a
    template, a mount) that could take the request before them: that one and those after it are
    left to the Router."""
    table: dict[str, list[Route]] = {}
    shadowed: set[str] = set()
    for i, route in enumerate(routes):
        path = _plain_path(route)
        if path is None or path in shadowed or not isinstance(route, Route):
            continue
        if any(_plain_path(r) != path and _can_match(r, path) for r in routes[:i]):
            shadowed.add(path)
            continue
        table.setdefault(path, []).append(route)
    return {path: tuple(found) for path, found in table.items()}


class ExactPathDispatch:
    """Innermost layer in front of the ``Router``: fixed paths by dict lookup."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self._table: dict[str, tuple[Route, ...]] | None = None
        self._routes_seen = -1

    def _lookup(self, path: str) -> tuple[Route, ...] | None:
        routes = self.router.routes
        if self._table is None or len(routes) != self._routes_seen:  # routes added after start
            self._table = exact_path_table(routes)
            self._routes_seen = len(routes)
        return self._table.get(path)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            candidates = self._lookup(scope["path"])
            if candidates is not None:
                method = scope["method"]
                for route in candidates:
                    # What Route.matches and Route.handle decide for a path known to be this
                    # route's own (no parameters): only the method is left to check.
                    if route.methods is None or method in route.methods:
                        scope.setdefault("router", self.router)
                        scope["route"] = route  # as the Router records it (the /metrics label)
                        scope["endpoint"] = route.endpoint
                        scope["path_params"] = dict(scope.get("path_params", ()))
                        await route.app(scope, receive, send)
                        return
        await self.router(scope, receive, send)


Endpoint = Callable[[Request], Awaitable[Response]]


def bare_request_response(endpoint: Endpoint) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await endpoint(Request(scope, receive, send))
        await response(scope, receive, send)

    return app


def lean_handlers(routes: Sequence[BaseRoute]) -> None:
    """Swap Starlette's ``request_response`` wrapper of each async function endpoint for
    ``bare_request_response`` (routes built with their own middleware or an ASGI app are left)."""
    for route in routes:
        if not isinstance(route, Route) or not inspect.iscoroutinefunction(route.endpoint):
            continue  # a sync function runs in Starlette's thread pool: left to request_response
        if getattr(route.app, "__qualname__", "") == "request_response.<locals>.app":
            route.app = bare_request_response(route.endpoint)
