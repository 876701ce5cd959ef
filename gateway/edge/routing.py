"""Route dispatch without a walk over every route, and route handlers without a second error layer.

Starlette's ``Router`` tries each route's regular expression in order, so a request for the 17th
route pays for 17 matches. ``ExactPathDispatch`` finds most of the gateway's paths, fixed strings,
with one dict lookup, and a templated one (``/prefix/items/{item}:{action}``) among only the
routes that share its first segment. It answers exactly what the ``Router`` would: a fixed path
goes into its table only when no earlier route (in the Router's order) can match that path; the
routes tried for a templated one keep the Router's order, and leave out only routes whose literal
first segment differs (they cannot match); anything not matched fully (a wrong method, no route, a
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


def _plain_path(route: BaseRoute) -> str | None:
    path = getattr(route, "path", None)
    if isinstance(route, Route) and isinstance(path, str) and "{" not in path:
        return path
    return None


def _can_match(route: BaseRoute, path: str) -> bool:
    # A Route whose path matches answers PARTIAL for another method, never NONE: one probe decides.
    probe: Scope = {"type": "http", "path": path, "root_path": "", "method": "GET", "headers": []}
    return route.matches(probe)[0] is not Match.NONE


def exact_path_table(routes: Sequence[BaseRoute]) -> dict[str, tuple[Route, ...]]:
    """Each fixed path and its routes, in order, up to the first route of another path (a
    template, a mount) that could take the request before them: that one and those after it are
    left to the Router. Only such routes are probed (another fixed path never matches), and only
    those whose first segment may be the path's: start-up stays linear in the routes, not square."""
    table: dict[str, list[Route]] = {}
    shadowed: set[str] = set()
    patterns: list[tuple[BaseRoute, str | None]] = []  # the routes before this one that are not fixed
    for route in routes:
        path = _plain_path(route)
        if path is None or not isinstance(route, Route):
            patterns.append((route, _literal_first_segment(route)))
            continue
        if path in shadowed:
            continue
        segment = _first_segment(path)
        if any(seg in (None, segment) and _can_match(r, path) for r, seg in patterns):
            shadowed.add(path)
            continue
        table.setdefault(path, []).append(route)
    return {path: tuple(found) for path, found in table.items()}


def _first_segment(path: str) -> str:
    return path.split("/", 2)[1] if path.startswith("/") else ""


def _literal_first_segment(route: BaseRoute) -> str | None:
    """The fixed first segment of a route's path; None when it may match any (a template there, or
    no path: a host, a root mount)."""
    path = getattr(route, "path", None)
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    segment = _first_segment(path)
    return None if "{" in segment else segment


def segment_table(
        routes: Sequence[BaseRoute]) -> tuple[dict[str, tuple[BaseRoute, ...]], tuple[BaseRoute, ...]]:
    """The routes that may match a path, by the path's first segment, in the Router's order: those
    of that literal first segment and those that may match any; the latter alone for the rest."""
    segments = [_literal_first_segment(route) for route in routes]
    anywhere = tuple(route for route, seg in zip(routes, segments, strict=True) if seg is None)
    table = {key: tuple(route for route, seg in zip(routes, segments, strict=True) if seg in (key, None))
             for key in {seg for seg in segments if seg is not None}}
    return table, anywhere


class ExactPathDispatch:
    """Innermost layer in front of the ``Router``: fixed paths by dict lookup, templated ones among
    the routes of their first segment."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self._table: dict[str, tuple[Route, ...]] = {}
        self._segments: dict[str, tuple[BaseRoute, ...]] = {}
        self._anywhere: tuple[BaseRoute, ...] = ()
        self._routes_seen = -1

    def _refresh(self) -> None:
        routes = self.router.routes
        if len(routes) != self._routes_seen:  # the first request, or routes added after start
            self._table = exact_path_table(routes)
            self._segments, self._anywhere = segment_table(routes)
            self._routes_seen = len(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            self._refresh()
            path = scope["path"]
            candidates = self._table.get(path)
            if candidates is None:
                await self._templated(path, scope, receive, send)
                return
            method = scope["method"]
            for route in candidates:
                # What Route.matches and Route.handle decide for a path known to be this route's
                # own (no parameters): only the method is left to check.
                if route.methods is None or method in route.methods:
                    scope.setdefault("router", self.router)
                    scope["route"] = route  # as the Router records it (the /metrics label)
                    scope["endpoint"] = route.endpoint
                    scope["path_params"] = dict(scope.get("path_params", ()))
                    await route.app(scope, receive, send)
                    return
        await self.router(scope, receive, send)

    async def _templated(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        for route in self._segments.get(_first_segment(path), self._anywhere):
            match, child_scope = route.matches(scope)
            if match is Match.FULL:  # as the Router hands over a full match
                scope.setdefault("router", self.router)
                scope["route"] = route
                scope.update(child_scope)
                await route.handle(scope, receive, send)
                return
        await self.router(scope, receive, send)  # a 405 for a partial match, a 404, a redirect


Endpoint = Callable[[Request], Awaitable[Response]]


def bare_request_response(endpoint: Endpoint) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        response = await endpoint(Request(scope, receive, send))
        await response(scope, receive, send)

    return app


def lean_handlers(routes: Sequence[BaseRoute]) -> None:
    """Swap Starlette's ``request_response`` wrapper of each async function endpoint for
    ``bare_request_response``. A function endpoint's ``Route.app`` is a plain function (what
    ``request_response`` returns); a route given its own middleware holds that middleware (an
    object) there instead, and is left as it is, as is an ASGI-app endpoint or a sync function
    (which runs in Starlette's thread pool)."""
    for route in routes:
        if (isinstance(route, Route) and inspect.iscoroutinefunction(route.endpoint)
                and inspect.isfunction(route.app)):
            route.app = bare_request_response(route.endpoint)
