"""The message family as the core sees it (``gateway.relay.families.WireFamily``): its key header (or a
Bearer token), the required date-form version header, ``/v1/messages*`` and its error envelope
``{"type": "error", "error": {"type", "message", "code"}}``."""

from __future__ import annotations

import datetime
import re

import orjson
from starlette.requests import HTTPConnection

from gateway.api import (
    BEARER,
    CredentialPlace,
    GatewayError,
    InvalidRequest,
    LimitsConfig,
    bearer_token,
    native_type,
)

PATH_PREFIX = "/v1/messages"
KEY_HEADER = "x-api-key"
# The SDK's spelling first: errors name it; the other spelling is accepted alike.
VERSION_HEADERS = ("anthropic-version", "vendorb-version")
_VERSION_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class MessagesFamily:
    name = "messages"
    credential_hint = f"the {KEY_HEADER} header"
    credential_places = (CredentialPlace("header", KEY_HEADER), BEARER)  # as ``credential`` reads them
    # The anthropic SDK adds /v1 itself: its base URL is the gateway's address (CONTRACT 6c).
    sdk_base_path = ""
    sdk_prefixes = ("/v1",)

    def owns_path(self, path: str) -> bool:
        return path.startswith(PATH_PREFIX)

    def credential(self, request: HTTPConnection) -> str | None:
        return request.headers.get(KEY_HEADER) or bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        """A date-form version header is required (any date: SDKs move on)."""
        version = request.headers.get(VERSION_HEADERS[0]) or request.headers.get(VERSION_HEADERS[1])
        if version is None:
            raise InvalidRequest(f"The {VERSION_HEADERS[0]} header is required, e.g. 2023-06-01.",
                                 param=VERSION_HEADERS[0])
        if not _is_date(version):
            raise InvalidRequest(f"The {VERSION_HEADERS[0]} header must be a date such as 2023-06-01.",
                                 param=VERSION_HEADERS[0])

    def render_error(self, err: GatewayError) -> bytes:
        return orjson.dumps({"type": "error", "error": {
            "type": native_type(err.status), "message": err.message, "code": err.code}})

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return None  # JSON bodies: ``limits.json_body_bytes``


def _is_date(value: str) -> bool:
    if _VERSION_DATE.fullmatch(value) is None:
        return False
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True
