"""The admin API (CONTRACT section 4) and the operations behind it.

``AdminOps`` holds the operations themselves (validation, money conversion, storage calls, cache
invalidation), so that the HTTP routes, the ``gateway users|keys`` commands and the first-start
bootstrap all behave the same. Amounts are USD numbers on the wire, nano-USD inside.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.accounts.keys import generate_api_key, generate_user_token, hash_secret, mask_key, parse_network
from gateway.accounts.metering.quota_leases import as_shown
from gateway.accounts.money import nano_to_usd, usd_to_nano
from gateway.accounts.records import KeyRecord, UserRecord
from gateway.admin.budgets import BudgetPeriod, budget_changes, budget_json, changes_budget
from gateway.admin.idempotency import admin_caller, idempotent
from gateway.edge.http import decode_body, endpoint, get_gateway, json_response, read_json_body, request_id
from gateway.edge.openapi import documented
from gateway.relay.families import DEFAULT_FAMILY
from gateway.runtime.errors import GatewayError, InvalidRequest, NotFound
from gateway.settings.config import Config
from gateway.settings.model_ids import pattern_problem
from gateway.settings.routes_check import in_catalogue
from gateway.storage.base import Storage
from gateway.storage.rows import KeyChanges, UserChanges

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
# USD amounts: a ceiling keeps nano-USD inside a signed 64-bit database integer.
Usd = Annotated[float, msgspec.Meta(ge=0, le=1_000_000_000)]
INT64_MAX = 2**63 - 1  # what the database columns hold; larger numbers are refused up front
UnixTime = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
RowId = Annotated[int, msgspec.Meta(ge=1, le=INT64_MAX)]
PerMinute = Annotated[int, msgspec.Meta(ge=1, le=INT64_MAX)]  # rpm / tpm (gateway.accounts.ratelimit)


class UserCreate(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    group: str = "default"
    quota_usd: Usd = 0.0
    budget_usd: Usd | None = None  # per budget_period (gateway.admin.budgets)
    budget_period: BudgetPeriod | None = None


class TopUp(msgspec.Struct, forbid_unknown_fields=True):
    amount_usd: Annotated[float, msgspec.Meta(gt=0, le=1_000_000_000)]


class KeyCreate(msgspec.Struct, forbid_unknown_fields=True):
    user_id: RowId
    name: Name = "default"
    quota_usd: Usd | None = None
    models: list[str] | None = None
    allow_ips: list[str] | None = None
    expires_at: UnixTime = 0
    enabled: bool = True
    rpm: PerMinute | None = None
    tpm: PerMinute | None = None
    soft_limit_usd: Usd | None = None
    budget_usd: Usd | None = None  # per budget_period (gateway.admin.budgets)
    budget_period: BudgetPeriod | None = None
    cache: bool = False  # the response cache serves this key even when cache.enabled is off


class KeyPatch(msgspec.Struct, forbid_unknown_fields=True):
    """Absent fields stay as they are; ``null`` clears ``quota_usd``, ``models``, ``allow_ips``,
    ``rpm``, ``tpm`` and ``soft_limit_usd``."""

    name: Name | msgspec.UnsetType = msgspec.UNSET
    quota_usd: Usd | msgspec.UnsetType | None = msgspec.UNSET
    models: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    allow_ips: list[str] | msgspec.UnsetType | None = msgspec.UNSET
    expires_at: UnixTime | msgspec.UnsetType = msgspec.UNSET
    enabled: bool | msgspec.UnsetType = msgspec.UNSET
    rpm: PerMinute | msgspec.UnsetType | None = msgspec.UNSET
    tpm: PerMinute | msgspec.UnsetType | None = msgspec.UNSET
    soft_limit_usd: Usd | msgspec.UnsetType | None = msgspec.UNSET
    budget_usd: Usd | msgspec.UnsetType | None = msgspec.UNSET
    budget_period: BudgetPeriod | msgspec.UnsetType | None = msgspec.UNSET
    cache: bool | msgspec.UnsetType = msgspec.UNSET


def optional_nano(usd: float | msgspec.UnsetType | None) -> int | msgspec.UnsetType | None:
    """A USD field of a PATCH in nano-USD, UNSET and None (clear) kept as they are."""
    return usd if usd is None or isinstance(usd, msgspec.UnsetType) else usd_to_nano(usd)


def _usd_or_none(nano: int | None) -> float | None:
    return None if nano is None else nano_to_usd(nano)


def user_json(user: UserRecord) -> dict[str, Any]:
    return {"id": user.id, "name": user.name, "group": user.group,
            "quota_usd": nano_to_usd(user.balance_nano), "used_usd": nano_to_usd(user.used_nano),
            "request_count": user.request_count, "created_at": user.created_at, "enabled": user.enabled,
            "soft_limit_usd": _usd_or_none(user.soft_limit_nano), **budget_json(user)}


def name_taken(name: str) -> GatewayError:
    """User names are unique among live users (CONTRACT 4): a taken one is a 409."""
    return GatewayError(f"The user name {name!r} is already taken.", status=409, code="name_taken",
                        param="name")


def key_json(key: KeyRecord, full_key: str | None = None) -> dict[str, Any]:
    """A key as the API shows it: ``key`` is the full key only in the answer that created it."""
    return {"id": key.id, "user_id": key.user_id, "name": key.name, "key": full_key or key.masked,
            "masked": key.masked, "enabled": key.enabled,
            "quota_usd": None if key.quota_nano is None else nano_to_usd(key.quota_nano),
            "spent_usd": nano_to_usd(key.spent_nano), "models": key.models,
            "allow_ips": key.allow_ips, "expires_at": key.expires_at, "created_at": key.created_at,
            "rpm": key.rpm, "tpm": key.tpm, "soft_limit_usd": _usd_or_none(key.soft_limit_nano),
            "cache": key.cache_responses, **budget_json(key)}


class AdminOps:
    """Every admin operation. ``changed`` is called after each mutation (``Authenticator.changed``)."""

    def __init__(self, storage: Storage, config: Config, changed: Callable[[], Awaitable[None]]) -> None:
        self.storage = storage
        self.config = config
        self.changed = changed

    # --- users -----------------------------------------------------------------------------------
    async def create_user(self, body: UserCreate, request_id: str) -> dict[str, Any]:
        """The new user, with its ``user_token`` (shown this once; only its hash is stored)."""
        if body.group not in self.config.groups:
            raise InvalidRequest(f"Invalid value for `group`: unknown group {body.group!r}.", param="group")
        if await self.storage.user_name_taken(body.name):
            raise name_taken(body.name)
        budget = budget_changes(body.budget_usd, body.budget_period, None)
        token = generate_user_token()
        try:
            user = await self.storage.create_user(body.name, body.group, usd_to_nano(body.quota_usd),
                                                  hash_secret(token), request_id)
        except Exception:
            if await self.storage.user_name_taken(body.name):  # a concurrent create won the name
                raise name_taken(body.name) from None
            raise
        if any(value is not None for value in budget.values()):
            user = await self.storage.update_user(user.id, UserChanges(**budget)) or user
        await self.changed()
        return {**user_json(user), "user_token": token}

    async def list_users(self) -> list[dict[str, Any]]:
        return [user_json(u) for u in await as_shown(self.storage, await self.storage.list_users())]

    async def get_user(self, user_id: int) -> dict[str, Any]:
        return await self.shown_json(await self._user(user_id))

    async def shown_json(self, user: UserRecord) -> dict[str, Any]:
        """``user_json`` of the user with what quota leases hold of its money counted as unspent."""
        return user_json((await as_shown(self.storage, [user]))[0])

    async def topup(self, user_id: int, body: TopUp, request_id: str) -> dict[str, Any]:
        user = await self.storage.topup(user_id, usd_to_nano(body.amount_usd), request_id)
        if user is None:
            raise NotFound(f"No user with id {user_id}.")
        await self.changed()
        return await self.shown_json(user)

    async def _user(self, user_id: int) -> UserRecord:
        user = await self.storage.get_user(user_id)
        if user is None:
            raise NotFound(f"No user with id {user_id}.")
        return user

    # --- keys ------------------------------------------------------------------------------------
    async def create_key(self, body: KeyCreate) -> dict[str, Any]:
        """The new key, with the full ``key`` (shown this once; only its hash is stored)."""
        await self._user(body.user_id)
        self._check_models(body.models)
        self._check_ips(body.allow_ips)
        budget = budget_changes(body.budget_usd, body.budget_period, None)
        secret = generate_api_key()
        record = KeyRecord(
            id=0, user_id=body.user_id, name=body.name, key_hash=hash_secret(secret),
            masked=mask_key(secret), enabled=body.enabled,
            quota_nano=None if body.quota_usd is None else usd_to_nano(body.quota_usd),
            models=body.models, allow_ips=body.allow_ips, expires_at=body.expires_at, rpm=body.rpm,
            tpm=body.tpm,
            soft_limit_nano=None if body.soft_limit_usd is None else usd_to_nano(body.soft_limit_usd),
            cache_responses=body.cache, **budget)
        key = await self.storage.create_key(record)
        await self.changed()
        return key_json(key, full_key=secret)

    async def list_keys(self, user_id: int | None = None) -> list[dict[str, Any]]:
        return [key_json(k) for k in await self.storage.list_keys(user_id)]

    async def get_key(self, key_id: int) -> dict[str, Any]:
        key = await self.storage.get_key(key_id)
        if key is None:
            raise NotFound(f"No key with id {key_id}.")
        return key_json(key)

    async def update_key(self, key_id: int, body: KeyPatch) -> dict[str, Any]:
        if not isinstance(body.models, msgspec.UnsetType):
            self._check_models(body.models)
        if not isinstance(body.allow_ips, msgspec.UnsetType):
            self._check_ips(body.allow_ips)
        budget: dict[str, Any] = {}
        if changes_budget(body.budget_usd, body.budget_period):
            current = await self.storage.get_key(key_id)
            if current is None:
                raise NotFound(f"No key with id {key_id}.")
            budget = budget_changes(body.budget_usd, body.budget_period, current)
        quota: int | msgspec.UnsetType | None = (
            usd_to_nano(body.quota_usd) if isinstance(body.quota_usd, float | int) else body.quota_usd)
        changes = KeyChanges(name=body.name, enabled=body.enabled, quota_nano=quota,
                             models=body.models, allow_ips=body.allow_ips, expires_at=body.expires_at,
                             rpm=body.rpm, tpm=body.tpm, soft_limit_nano=optional_nano(body.soft_limit_usd),
                             cache_responses=body.cache, **budget)
        key = await self.storage.update_key(key_id, changes)
        if key is None:
            raise NotFound(f"No key with id {key_id}.")
        await self.changed()
        return key_json(key)

    async def delete_key(self, key_id: int) -> None:
        if not await self.storage.delete_key(key_id):
            raise NotFound(f"No key with id {key_id}.")
        await self.changed()

    def _check_models(self, models: list[str] | None) -> None:
        for i, model_id in enumerate(models or ()):
            # An id or a pattern (``vendor/*``) the catalogue prices, itself or by a pattern.
            if pattern_problem(model_id) or not in_catalogue(self.config.models_by_id, model_id):
                raise InvalidRequest(f"Invalid value for `models[{i}]`: unknown model {model_id!r}.",
                                     param=f"models[{i}]")

    @staticmethod
    def _check_ips(allow_ips: list[str] | None) -> None:
        for i, entry in enumerate(allow_ips or ()):
            try:
                parse_network(entry)
            except ValueError:
                raise InvalidRequest(f"Invalid value for `allow_ips[{i}]`: not an IP or CIDR: {entry!r}.",
                                     param=f"allow_ips[{i}]") from None


# --- HTTP routes ---------------------------------------------------------------------------------

def _ops(request: Request) -> AdminOps:
    """The operations, once the caller proved it holds the admin key."""
    gateway = get_gateway(request)
    gateway.auth.authenticate_admin(request)
    return AdminOps(gateway.storage, gateway.config, gateway.auth.changed)


def _path_id(request: Request) -> int:
    """The ``{id}`` of the path; one that cannot be a row id (not digits, beyond int64) names
    nothing, so it is a 404 like any unknown id."""
    raw = request.path_params["id"]
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and 1 <= int(raw) <= INT64_MAX):
        raise NotFound(f"No such id: {raw[:40]!r}.")
    return int(raw)


@endpoint(DEFAULT_FAMILY)
@documented("Create a user", request=UserCreate, status=201)
@idempotent(admin_caller)
async def create_user(request: Request) -> Response:
    ops = _ops(request)
    body = decode_body(await read_json_body(request), UserCreate)
    return json_response(await ops.create_user(body, request_id(request)), status=201)


@endpoint(DEFAULT_FAMILY)
async def list_users(request: Request) -> Response:
    await get_gateway(request).meter.settled()  # read your writes: balances as the calls left them
    return json_response({"data": await _ops(request).list_users()})


@endpoint(DEFAULT_FAMILY)
async def get_user(request: Request) -> Response:
    await get_gateway(request).meter.settled()  # read your writes
    return json_response(await _ops(request).get_user(_path_id(request)))


@endpoint(DEFAULT_FAMILY)
@documented("Top up a user's quota", request=TopUp)
@idempotent(admin_caller)
async def topup(request: Request) -> Response:
    ops = _ops(request)
    body = decode_body(await read_json_body(request), TopUp)
    return json_response(await ops.topup(_path_id(request), body, request_id(request)))


@endpoint(DEFAULT_FAMILY)
@documented("Create an API key", request=KeyCreate, status=201)
@idempotent(admin_caller)
async def create_key(request: Request) -> Response:
    ops = _ops(request)
    body = decode_body(await read_json_body(request), KeyCreate)
    return json_response(await ops.create_key(body), status=201)


@endpoint(DEFAULT_FAMILY)
async def list_keys(request: Request) -> Response:
    ops = _ops(request)
    await get_gateway(request).meter.settled()  # read your writes: spent and budget_spent_usd
    raw = request.query_params.get("user_id")
    try:
        user_id = int(raw) if raw else None
        if user_id is not None and not 0 <= user_id <= INT64_MAX:
            raise ValueError(raw)
    except ValueError:
        raise InvalidRequest("Invalid value for `user_id`: expected an integer.", param="user_id") from None
    return json_response({"data": await ops.list_keys(user_id)})


@endpoint(DEFAULT_FAMILY)
async def get_key(request: Request) -> Response:
    ops = _ops(request)
    await get_gateway(request).meter.settled()  # read your writes
    return json_response(await ops.get_key(_path_id(request)))


@endpoint(DEFAULT_FAMILY)
@documented("Change an API key", request=KeyPatch)
async def update_key(request: Request) -> Response:
    ops = _ops(request)
    body = decode_body(await read_json_body(request), KeyPatch)
    return json_response(await ops.update_key(_path_id(request), body))


@endpoint(DEFAULT_FAMILY)
async def delete_key(request: Request) -> Response:
    await _ops(request).delete_key(_path_id(request))
    return Response(status_code=204)


def admin_routes() -> list[BaseRoute]:
    return [
        Route("/admin/users", create_user, methods=["POST"]),
        Route("/admin/users", list_users, methods=["GET"]),
        Route("/admin/users/{id}", get_user, methods=["GET"]),
        Route("/admin/users/{id}/topup", topup, methods=["POST"]),
        Route("/admin/keys", create_key, methods=["POST"]),
        Route("/admin/keys", list_keys, methods=["GET"]),
        Route("/admin/keys/{id}", get_key, methods=["GET"]),
        Route("/admin/keys/{id}", update_key, methods=["PATCH"]),
        Route("/admin/keys/{id}", delete_key, methods=["DELETE"]),
    ]
