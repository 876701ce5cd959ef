"""Music tasks as the core sees them (``gateway.families.WireFamily``): everything under
``/music``, a Bearer credential and the default (OpenAI-style) envelope of CONTRACT 5."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.config import LimitsConfig
from gateway.errors import GatewayError
from gateway.families import BEARER_HINT, bearer_token, render_default_error

PREFIX = "/music"


class MusicFamily:
    name = "music"
    credential_hint = BEARER_HINT

    def owns_path(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/")

    def credential(self, request: HTTPConnection) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        return None

    def render_error(self, err: GatewayError) -> bytes:
        return render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return None
