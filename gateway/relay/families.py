"""The client side of a wire family, as the core sees it: paths, credential, envelope, body limit.

A translator package describes its family with one ``WireFamily`` object returned from the
``gateway_families`` hook. The core never names a family: it asks the registry which family owns a
path (for the envelope of a 404, a 413 or a 500), asks the family for the caller's credential and
header rules (``Authenticator.authenticate``), and asks it to render every error of its routes.

Paths that no family owns (admin, account, health, unknown) get the gateway's own envelope,
``render_default_error`` (the OpenAI-style shape of CONTRACT section 5), which a family may reuse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import orjson

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from gateway.runtime.errors import GatewayError
    from gateway.settings.config import LimitsConfig

__all__ = [
    "BEARER",
    "BEARER_HINT",
    "DEFAULT_FAMILY",
    "MULTIPART_SLACK",
    "BearerFamily",
    "CredentialPlace",
    "FamilyRegistry",
    "WireFamily",
    "bearer_token",
    "native_type",
    "render_default_error",
    "sdk_base_path",
]

DEFAULT_FAMILY = "default"
# Where a Bearer credential sits, in the words of the 401 that says it is missing.
BEARER_HINT = "the Authorization header (Bearer <key>)"
# Multipart bodies carry boundaries and the other form fields besides the file itself: a family
# whose upload limit is a file size adds this to it in ``body_limit``.
MULTIPART_SLACK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CredentialPlace:
    """One place a family's ``credential`` reads the caller's key from, as its documentation
    (``/openapi.json``, ``gateway.edge.openapi``) shows it: a family may declare its places in a
    ``credential_places`` tuple."""

    kind: Literal["bearer", "header", "query"]
    name: str = ""  # the header or query parameter; "" for "bearer" (the Authorization header)


BEARER = CredentialPlace("bearer")


class WireFamily(Protocol):
    """What a client-facing wire family tells the core. Implementations are plain objects, made
    once per plugin manager, holding no per-request state."""

    # Read-only members (a property here) so that a frozen object such as ``BearerFamily`` fits.
    @property
    def name(self) -> str:
        """"chat", "messages", "v1beta", "ollama", ...; also the log's ``family`` column."""
        ...

    def owns_path(self, path: str) -> bool:
        """True when errors on ``path`` (routed or not) are rendered in this family's envelope."""
        ...

    def credential(self, request: HTTPConnection) -> str | None:
        """The API key the caller sent, from wherever this family carries it; None when absent.
        ``credential_hint`` is shown when it is absent."""
        ...

    @property
    def credential_hint(self) -> str:
        """Where the credential goes, e.g. "the Authorization header (Bearer <key>)"."""
        ...

    def check_headers(self, request: HTTPConnection) -> None:
        """Raise InvalidRequest for a missing or malformed required header (a version header);
        called after the credential was found and before it is looked up."""
        ...

    def render_error(self, err: GatewayError) -> bytes:
        """``err`` (status, code, message, param) as a body in this family's error envelope."""
        ...

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        """The request-body limit for ``path`` when it differs from ``limits.json_body_bytes``."""
        ...

    # Optional members, read with getattr, for the base URLs users get wrong with the family's SDK
    # (``gateway.edge.wrong_paths``): ``sdk_base_path``, what its SDK's base URL holds after the
    # gateway's address ("/v1" for the openai SDK, "" when the SDK adds its own version);
    # ``sdk_prefixes``, the version segments the SDK adds itself; ``unprefixed_paths``, paths a
    # client may call without ``sdk_base_path``, served as their prefixed forms.


class FamilyRegistry:
    """Every registered family; built once per app from the ``gateway_families`` hook."""

    def __init__(self, families: Iterable[WireFamily]) -> None:
        self._by_name: dict[str, WireFamily] = {}
        for family in families:
            self._by_name[family.name] = family  # the last wins (gateway.hooks.manager's rule)
        self._aliases = {path: sdk_base_path(family) + path for family in self._by_name.values()
                         for path in getattr(family, "unprefixed_paths", ())}
        versions = {v for family in self._by_name.values() for v in getattr(family, "sdk_prefixes", ())}
        # Two version segments in a row: a base URL that held one, and the SDK that added one.
        self.doubled_starts = tuple(sorted(f"{a}{b}/" for a in versions for b in versions))

    def alias(self, path: str) -> str | None:
        """The path an unprefixed one is served as (a family's ``unprefixed_paths``), else None."""
        return self._aliases.get(path) if self._aliases else None

    def sdk_base_paths(self) -> set[str]:
        return {base for family in self._by_name.values() if (base := sdk_base_path(family))}

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str) -> WireFamily | None:
        return self._by_name.get(name)

    def for_path(self, path: str) -> WireFamily | None:
        """The family whose envelope errors on ``path`` get; None: the gateway's own envelope."""
        for family in self._by_name.values():
            if family.owns_path(path):
                return family
        return None

    def render(self, name: str | None, err: GatewayError) -> bytes:
        family = self._by_name.get(name) if name else None
        return family.render_error(err) if family is not None else render_default_error(err)

    def render_for_path(self, path: str, err: GatewayError) -> bytes:
        family = self.for_path(path)
        return family.render_error(err) if family is not None else render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int:
        family = self.for_path(path)
        limit = family.body_limit(path, limits) if family is not None else None
        return limit if limit is not None else limits.json_body_bytes


def sdk_base_path(family: WireFamily) -> str:
    """What the family's SDK's base URL holds after the gateway's address (see ``WireFamily``)."""
    return str(getattr(family, "sdk_base_path", ""))


@dataclass(frozen=True, slots=True)
class BearerFamily:
    """A ``WireFamily`` with a Bearer credential, no header rule and the default envelope: the
    shape most OpenAI-style families share, so that each declares only what differs.

    It owns every path under ``prefixes``: a prefix without a trailing "/" owns itself and what is
    below it, one with a trailing "/" only what is below it. ``limit`` (of the limits config) is the
    body limit of ``limited_paths`` (a trailing "/" ignored); every other path has the JSON limit.
    A family with another ownership rule subclasses it and overrides ``owns_path``."""

    name: str
    prefixes: tuple[str, ...] = ()
    limited_paths: frozenset[str] = frozenset()
    limit: Callable[[LimitsConfig], int] | None = None
    credential_hint: str = BEARER_HINT
    credential_places: tuple[CredentialPlace, ...] = (BEARER,)
    # The optional members of ``WireFamily`` for the base URLs users get wrong.
    sdk_base_path: str = ""
    sdk_prefixes: tuple[str, ...] = ()
    unprefixed_paths: frozenset[str] = frozenset()

    def owns_path(self, path: str) -> bool:
        for prefix in self.prefixes:
            below = prefix if prefix.endswith("/") else prefix + "/"
            if path == prefix or path.startswith(below):
                return True
        return False

    def credential(self, request: HTTPConnection) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        return None

    def render_error(self, err: GatewayError) -> bytes:
        return render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        if self.limit is not None and path.rstrip("/") in self.limited_paths:
            return self.limit(limits)
        return None


def bearer_token(request: HTTPConnection) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; "" for another scheme, None
    when there is no such header."""
    value = request.headers.get("authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    return token if scheme.lower() == "bearer" else ""


_NATIVE_TYPE = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 405: "invalid_request_error", 408: "invalid_request_error",
                409: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error"}


def native_type(status: int) -> str:
    """The error ``type`` for an HTTP status in the default envelope (CONTRACT section 5)."""
    if status >= 500:
        return "api_error"
    return _NATIVE_TYPE.get(status, "invalid_request_error")


def render_default_error(err: GatewayError) -> bytes:
    """``{"error": {"message", "type", "code"[, "param"]}}``: admin, account and unowned paths."""
    inner: dict[str, object] = {"message": err.message, "type": native_type(err.status), "code": err.code}
    if err.param is not None:
        inner["param"] = err.param
    return orjson.dumps({"error": inner})
