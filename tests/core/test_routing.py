"""Fixed paths by dict lookup (``gateway.routing``): the same route answers as Starlette's walk over
the routes would pick, errors included."""

from __future__ import annotations

from typing import Any

import pytest_asyncio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from gateway.context import Gateway
from gateway.errors import InvalidRequest
from gateway.hookspecs import hookimpl
from gateway.routing import exact_path_table

from .envelopes import assert_error


def _named(name: str) -> Any:
    async def handler(request: Request) -> Response:
        return JSONResponse({"route": name, "params": request.path_params,
                             "template": request.scope["route"].path})  # what /metrics labels

    return handler


class Shadows:
    """A template listed before a fixed path it also matches, and a fixed path on two routes."""

    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        async def refuses(request: Request) -> Response:  # no ``endpoint`` wrapper
            raise InvalidRequest("no", param="x")

        def sync_endpoint(request: Request) -> Response:  # Starlette runs it in its thread pool
            return JSONResponse({"route": "sync"})

        return [Route("/sync", sync_endpoint, methods=["GET"]),
                Route("/probe/{name}", _named("template"), methods=["GET"]),
                Route("/probe/fixed", _named("fixed, shadowed"), methods=["GET"]),
                Route("/solo", _named("solo get"), methods=["GET"]),
                Route("/solo", _named("solo post"), methods=["POST"]),
                Route("/refuses", refuses, methods=["POST"])]


@pytest_asyncio.fixture
async def shadows(gateway_server: Any, make_config: Any) -> Any:
    return await gateway_server(make_config(), extra_plugins=[Shadows()])


def test_a_fixed_path_that_an_earlier_route_matches_is_left_to_the_router() -> None:
    routes: list[BaseRoute] = [Route("/a/{x}", _named("t")), Route("/a/b", _named("b")),
                               Mount("/m", routes=[]), Route("/m/c", _named("c")),
                               Route("/d", _named("d1"), methods=["GET"]),
                               Route("/d", _named("d2"), methods=["POST"]),
                               Route("/e", _named("e1"), methods=["GET"]), Route("/{any}", _named("t2")),
                               Route("/e", _named("e2"), methods=["POST"])]
    table = exact_path_table(routes)
    assert set(table) == {"/d", "/e"}
    assert table["/d"] == (routes[4], routes[5])
    assert table["/e"] == (routes[6],)  # a POST /e goes to the Router, which picks /{any}


async def test_the_route_starlette_would_pick_answers(shadows: Any) -> None:
    reply = await shadows.request("GET", "/probe/fixed")
    assert reply.json() == {"route": "template", "params": {"name": "fixed"}, "template": "/probe/{name}"}
    assert (await shadows.request("GET", "/solo")).json() == {"route": "solo get", "params": {},
                                                              "template": "/solo"}
    assert (await shadows.request("POST", "/solo")).json()["route"] == "solo post"
    assert_error(await shadows.request("PUT", "/solo"), "chat", 405, "method_not_allowed")
    assert (await shadows.request("GET", "/sync")).json() == {"route": "sync"}


async def test_an_unwrapped_route_error_is_still_the_family_envelope(shadows: Any) -> None:
    reply = await shadows.request("POST", "/refuses", json={})
    body = assert_error(reply, "chat", 400, "invalid_request")
    assert body.get("param") == "x"
