"""Fixed paths by dict lookup (``gateway.edge.routing``): the same route answers as Starlette's walk over
the routes would pick, errors included."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import Message

from gateway.edge.routing import ExactPathDispatch, exact_path_table, segment_table
from gateway.hooks.specs import hookimpl
from gateway.runtime.context import Gateway
from gateway.runtime.errors import InvalidRequest

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


def _mixed_routes() -> list[BaseRoute]:
    return [Route("/v1/a", _named("v1 a"), methods=["POST"]),
            Route("/v1beta/models/{model}:{method}", _named("v1beta model"), methods=["POST"]),
            Route("/v1beta/models/{model}", _named("v1beta get"), methods=["GET"]),
            Route("/v1/tasks/{id}", _named("v1 task"), methods=["GET"]),
            Route("/x{rest:path}", _named("x anything"), methods=["GET"]),
            Route("/v1/tasks/{id}/fetch", _named("v1 fetch"), methods=["GET"]),
            Route("/{first}/models/{model}", _named("any models"), methods=["GET", "POST"]),
            Mount("/console", routes=[Route("/page", _named("console page"))]),
            Route("/v1beta/models/fixed:go", _named("shadowed"), methods=["POST"]),
            Route("/v1/models/{model}", _named("v1 models, after any models"), methods=["GET"])]


def test_the_routes_of_a_first_segment_keep_the_routers_order() -> None:
    routes = _mixed_routes()
    table, anywhere = segment_table(routes)
    assert anywhere == (routes[4], routes[6])  # a template in the first segment may match anything
    assert table["v1beta"] == (routes[1], routes[2], routes[4], routes[6], routes[8])
    assert table["v1"] == (routes[0], routes[3], routes[4], routes[5], routes[6], routes[9])
    assert table["console"] == (routes[4], routes[6], routes[7])


async def _answer_of(app: Any, method: str, path: str) -> tuple[int, bytes]:
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"",
             "headers": [], "path_params": {}}
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize(("method", "path"), [
    ("POST", "/v1beta/models/gem:generateContent"), ("GET", "/v1beta/models/gem"),
    ("POST", "/v1beta/models/fixed:go"), ("GET", "/v1beta/models/gem:generateContent"),
    ("GET", "/v1/tasks/t1"), ("GET", "/v1/tasks/t1/fetch"), ("POST", "/v1/tasks/t1"),
    ("GET", "/xyz/anything/at/all"), ("GET", "/v2/models/m"), ("POST", "/v9/models/m"),
    ("GET", "/console/page"), ("GET", "/nowhere"), ("POST", "/v1/a"), ("GET", "/v1/a"),
    ("GET", "/v1/models/m"),
])
async def test_a_templated_path_gets_the_routers_answer(method: str, path: str) -> None:
    router = Router(routes=_mixed_routes())
    assert await _answer_of(ExactPathDispatch(router), method, path) == await _answer_of(router, method, path)
