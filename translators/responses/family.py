"""The Responses family as the core sees it (``gateway.families.WireFamily``): ``/v1/responses``
and everything below it, a Bearer credential, the OpenAI-style envelope."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.config import LimitsConfig
from gateway.errors import GatewayError
from gateway.families import BEARER_HINT, bearer_token, render_default_error

PREFIX = "/v1/responses"


class ResponsesFamily:
    name = "responses"
    credential_hint = BEARER_HINT

    def owns_path(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def credential(self, request: HTTPConnection) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        return None  # no version header on this wire

    def render_error(self, err: GatewayError) -> bytes:
        return render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return None  # JSON bodies: ``limits.json_body_bytes``
