"""Video task B as the core sees it (``gateway.families.WireFamily``): ``/v1/videos`` and below, a
Bearer credential and the default (OpenAI-style) envelope of CONTRACT 5."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.config import LimitsConfig
from gateway.errors import GatewayError
from gateway.families import BEARER_HINT, bearer_token, render_default_error

PREFIX = "/v1/videos"


class VideosFamily:
    name = "videos"
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
        return None  # JSON or a small multipart form (a reference image): ``limits.json_body_bytes``
