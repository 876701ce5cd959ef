"""Users' own API keys (CONTRACT 4a): ``GET/POST /api/keys``, ``GET/PATCH/DELETE /api/keys/{id}``
with the caller's user token.

Same fields, validation and answers as the admin key API (``AdminOps``, whose code this reuses:
nothing here re-validates a field), minus ``user_id``, which is always the caller. Another user's
key is a 404, exactly like a key that does not exist. A user can never give a key more than their
own rights: its model allowlist must stay inside the models their group may call.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    DEFAULT_FAMILY,
    Gateway,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    decode_body,
    endpoint,
    get_gateway,
    hookimpl,
    json_response,
    read_json_body,
)
from gateway.api.accounts import AdminOps, KeyCreate, KeyPatch, UserRecord, idempotent, listed, user_caller
from gateway.api.accounts import path_id as _path_id


def _own(key: dict[str, Any]) -> dict[str, Any]:
    """A key as the admin API shows it, without ``user_id`` (always the caller)."""
    return {k: v for k, v in key.items() if k != "user_id"}


def check_rights(gw: Gateway, user: UserRecord, models: list[str] | None) -> None:
    """A key's allowlist may only name models the user's group may call (no more than their own
    rights); ``None`` (every model) is bounded by the group at call time anyway."""
    group = gw.config.groups.get(user.group) or gw.config.groups.get("default")
    allowed = group.models if group is not None else None
    if allowed is None:
        return
    for i, model_id in enumerate(models or ()):
        if not listed(allowed, model_id):  # the group's list may hold patterns (``vendor/*``)
            raise PermissionDenied(f"Invalid value for `models[{i}]`: your group may not use {model_id!r}.",
                                   param=f"models[{i}]")


async def _caller(request: Request) -> tuple[AdminOps, UserRecord]:
    gw = get_gateway(request)
    user = await gw.auth.authenticate_user_token(request)
    return AdminOps(gw.storage, gw.config, gw.auth.changed), user


async def _own_key_id(ops: AdminOps, user: UserRecord, request: Request) -> int:
    key_id = _path_id(request)
    key = await ops.storage.get_key(key_id)
    if key is None or key.user_id != user.id:
        raise NotFound(f"No key with id {key_id}.")
    return key_id


@endpoint(DEFAULT_FAMILY)
async def list_keys(request: Request) -> Response:
    ops, user = await _caller(request)
    await get_gateway(request).meter.settled()  # read your writes: spent and budget_spent_usd
    return json_response({"data": [_own(k) for k in await ops.list_keys(user.id)]})


@endpoint(DEFAULT_FAMILY)
@idempotent(user_caller)
async def create_key(request: Request) -> Response:
    ops, user = await _caller(request)
    raw = await read_json_body(request)
    fields = decode_body(raw, dict)  # an object, valid JSON; the fields are checked as KeyCreate
    if "user_id" in fields:
        raise InvalidRequest("Invalid value for `user_id`: unknown field (a key is always yours).",
                             param="user_id")
    # msgspec, not orjson: a field may hold an integer wider than 64 bits (a 400, not a 500).
    body = decode_body(msgspec.json.encode({**fields, "user_id": user.id}), KeyCreate)
    check_rights(get_gateway(request), user, body.models)
    return json_response(_own(await ops.create_key(body)), status=201)


@endpoint(DEFAULT_FAMILY)
async def get_key(request: Request) -> Response:
    ops, user = await _caller(request)
    return json_response(_own(await ops.get_key(await _own_key_id(ops, user, request))))


@endpoint(DEFAULT_FAMILY)
async def update_key(request: Request) -> Response:
    ops, user = await _caller(request)
    key_id = await _own_key_id(ops, user, request)
    body = decode_body(await read_json_body(request), KeyPatch)
    if not isinstance(body.models, msgspec.UnsetType):
        check_rights(get_gateway(request), user, body.models)
    return json_response(_own(await ops.update_key(key_id, body)))


@endpoint(DEFAULT_FAMILY)
async def delete_key(request: Request) -> Response:
    ops, user = await _caller(request)
    await ops.delete_key(await _own_key_id(ops, user, request))
    return Response(status_code=204)


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    return [
        Route("/api/keys", list_keys, methods=["GET"]),
        Route("/api/keys", create_key, methods=["POST"]),
        Route("/api/keys/{id}", get_key, methods=["GET"]),
        Route("/api/keys/{id}", update_key, methods=["PATCH"]),
        Route("/api/keys/{id}", delete_key, methods=["DELETE"]),
    ]
