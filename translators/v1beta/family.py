"""The v1beta family as the core sees it (``gateway.relay.families.WireFamily``): its key header (also the
SDK's spelling, ``?key=`` and Bearer), ``/v1beta/*`` plus the SDK's ``/v1/models/{model}:{method}``
alias, and the Gemini error envelope ``{"error": {"code", "message", "status", "details"}}``."""

from __future__ import annotations

import re

import orjson
from starlette.requests import HTTPConnection

from gateway.api import BEARER, CredentialPlace, GatewayError, LimitsConfig, bearer_token

KEY_HEADERS = ("x-goog-api-key", "x-vendorc-api-key")  # the first is named in errors
KEY_QUERY = "key"
PATH_PREFIX = "/v1beta"
# google-genai calls ``/v1/models/{model}:{method}`` by default; a colon then a method name in the
# last segment of a model path is what tells it from the chat family's model retrieval.
_V1_MODEL_METHOD = re.compile(r"^/v1/models/[^/]+:[A-Za-z]+$")

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
           404: "NOT_FOUND", 405: "INVALID_ARGUMENT", 413: "INVALID_ARGUMENT",
           429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 504: "UNAVAILABLE"}
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def native_status(status: int) -> str:
    """The envelope's ``status`` for an HTTP status (CONTRACT section 5)."""
    return _STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")


def render(status: int, code: str, message: str) -> bytes:
    """An error in this family's envelope (also the in-band error of a started stream)."""
    return orjson.dumps({"error": {"code": status, "message": message, "status": native_status(status),
                                   "details": [{"@type": _ERROR_INFO, "reason": code}]}})


class V1betaFamily:
    name = "v1beta"
    # google-genai adds its api_version (v1beta, or v1) itself: its base URL is the gateway's address.
    sdk_base_path = ""
    sdk_prefixes = ("/v1beta", "/v1")
    credential_hint = f"the {KEY_HEADERS[0]} header"
    # As ``credential`` reads them.
    credential_places = (*(CredentialPlace("header", h) for h in KEY_HEADERS),
                         CredentialPlace("query", KEY_QUERY), BEARER)

    def owns_path(self, path: str) -> bool:
        return (path.startswith(PATH_PREFIX + "/") or path == PATH_PREFIX
                or _V1_MODEL_METHOD.match(path) is not None)

    def credential(self, request: HTTPConnection) -> str | None:
        headers = request.headers
        return (headers.get(KEY_HEADERS[0]) or headers.get(KEY_HEADERS[1])
                or request.query_params.get(KEY_QUERY) or bearer_token(request))

    def check_headers(self, request: HTTPConnection) -> None:
        return None  # no version header on this wire

    def render_error(self, err: GatewayError) -> bytes:
        return render(err.status, err.code, err.message)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return None  # JSON bodies: ``limits.json_body_bytes``
