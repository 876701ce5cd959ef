"""``GET /openapi.json``: the gateway's OpenAPI 3.1 document (``gateway.edge.openapi``), public.

Built from the app's route table at the first request, when every plugin's routes are in it (in a
worker thread, so that other requests need not wait for the work), and kept for
the life of the app in ``gateway.extensions["openapi"]`` (the routes do not change).
"""

from __future__ import annotations

import asyncio

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    DEFAULT_FAMILY,
    JSON_MEDIA_TYPE,
    Gateway,
    build_document,
    documented,
    endpoint,
    get_gateway,
    hookimpl,
)

EXTENSION = "openapi"
PATH = "/openapi.json"


@endpoint(DEFAULT_FAMILY)
@documented("This document: the gateway's OpenAPI 3.1 description", public=True)
async def openapi_document(request: Request) -> Response:
    gw = get_gateway(request)
    body = gw.extensions.get(EXTENSION)
    if not isinstance(body, bytes):
        document = await asyncio.to_thread(build_document, request.app.routes, gw.families)
        body = orjson.dumps(document)
        gw.extensions[EXTENSION] = body
    return Response(body, media_type=JSON_MEDIA_TYPE)


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [Route(PATH, openapi_document, methods=["GET"])]
