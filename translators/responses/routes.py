"""The Responses family's endpoints: create (``pipeline``), and the stored responses: retrieve,
delete, and list the input items. A response is the caller's user's only: another user's id is
404 here, exactly like an unknown one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import InvalidRequest, NotFound, documented, endpoint, get_gateway
from gateway.api.accounts import Principal
from translators.responses.pipeline import FAMILY, create_response
from translators.responses.response import json_body
from translators.responses.state import KIND, get_turn, input_items
from translators.responses.wire import ResponsesRequest

MAX_LIMIT = 100


async def _caller(request: Request) -> Principal:
    return await get_gateway(request).auth.authenticate(request, FAMILY)


@endpoint(FAMILY)
@documented("Create a response", request=ResponsesRequest, stream=True)
async def create(request: Request) -> Response:
    return await create_response(request)


@endpoint(FAMILY)
async def retrieve(request: Request) -> Response:
    principal = await _caller(request)
    turn = await get_turn(get_gateway(request).storage, principal.user.id, request.path_params["response_id"])
    return json_body(turn.response)


@endpoint(FAMILY)
async def delete(request: Request) -> Response:
    principal = await _caller(request)
    response_id = request.path_params["response_id"]
    if not await get_gateway(request).storage.delete_document(KIND, response_id, principal.user.id):
        raise NotFound(f"No response with id '{response_id}' was found.")
    return json_body({"id": response_id, "object": "response", "deleted": True})


@endpoint(FAMILY)
async def list_input_items(request: Request) -> Response:
    principal = await _caller(request)
    storage = get_gateway(request).storage
    limit, order, after = _page_params(request)
    turn = await get_turn(storage, principal.user.id, request.path_params["response_id"])
    items = await input_items(storage, principal.user.id, turn)
    if order == "desc":
        items.reverse()
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise InvalidRequest(
                f"Invalid value for `after`: no input item has the id '{after}'.", param="after"
            )
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return json_body(
        {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(items) > limit,
        }
    )


def _page_params(request: Request) -> tuple[int, str, str | None]:
    query = request.query_params
    raw_limit = query.get("limit", "20")
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_LIMIT:
        raise InvalidRequest(f"Invalid value for `limit`: an integer from 1 to {MAX_LIMIT}.", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest("Invalid value for `order`: `asc` or `desc`.", param="order")
    return int(raw_limit), order, query.get("after")


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/{response_id}", retrieve, methods=["GET"]),
        Route("/v1/responses/{response_id}", delete, methods=["DELETE"]),
        Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
    ]
