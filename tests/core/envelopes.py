"""Assertions on the three error envelopes (CONTRACT section 5) and a probe plugin whose routes
authenticate exactly as a translator does, so auth is tested without any translator."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.edge.http import endpoint, get_gateway, json_response
from gateway.hooks.specs import hookimpl
from gateway.runtime.context import Gateway

FAMILIES = ("chat", "messages", "v1beta")
NATIVE_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large",
               500: "api_error"}
NATIVE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT", 500: "INTERNAL"}


def assert_error(reply: Any, family: str, status: int, code: str) -> dict[str, Any]:
    """``reply`` is ``status`` with ``code`` in ``family``'s envelope and a request id; returns the
    body's inner error object."""
    assert reply.status == status, reply.text
    assert reply.headers["X-Service-Request-Id"].startswith("req_")
    assert reply.headers["Content-Type"].startswith("application/json")
    body = reply.json()
    if family == "messages":
        assert body["type"] == "error"
        inner = body["error"]
        assert inner["type"] == NATIVE_TYPE[status] and inner["code"] == code
    elif family == "v1beta":
        inner = body["error"]
        assert inner["code"] == status and inner["status"] == NATIVE_STATUS[status]
        assert inner["details"][0]["reason"] == code
    else:
        inner = body["error"]
        assert inner["type"] == NATIVE_TYPE[status] and inner["code"] == code
    assert inner["message"]
    assert "Traceback" not in reply.text
    return inner


def credentials(family: str, key: str) -> dict[str, str]:
    """Headers carrying ``key`` the way a client of ``family`` sends it."""
    if family == "messages":
        return {"x-api-key": key, "anthropic-version": "2023-06-01"}
    if family == "v1beta":
        return {"x-goog-api-key": key}
    return {"Authorization": f"Bearer {key}"}


def no_credentials(family: str) -> dict[str, str]:
    return {"anthropic-version": "2023-06-01"} if family == "messages" else {}


def _probe(family: str) -> Any:
    @endpoint(family)
    async def probe(request: Request) -> Response:
        gateway = get_gateway(request)
        principal = await gateway.auth.authenticate(request, family)
        model = request.query_params.get("model")
        if model:
            gateway.catalogue.check(principal, model)
        return json_response({"key_id": principal.key.id, "user_id": principal.user.id,
                              "ip": principal.client_ip})

    return probe


@endpoint("chat")
async def user_probe(request: Request) -> Response:
    user = await get_gateway(request).auth.authenticate_user_token(request)
    return json_response({"user_id": user.id})


class AuthProbe:
    """``/probe/<family>[?model=]`` authenticates (and checks the model) like a translator;
    ``/probe/user`` takes a user token like ``/api/user/self``."""

    @hookimpl
    def gateway_routes(self, gateway: Gateway) -> list[BaseRoute]:
        routes: list[BaseRoute] = [Route(f"/probe/{f}", _probe(f), methods=["GET", "POST"]) for f in FAMILIES]
        return [*routes, Route("/probe/user", user_probe, methods=["GET"])]
