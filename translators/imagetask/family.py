"""The image-task family as the core sees it (``gateway.families.WireFamily``): everything under
``/imagetask``, a Bearer credential, and the gateway's default (OpenAI-style) error envelope, as
CONTRACT 5 gives the media families."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.config import LimitsConfig
from gateway.errors import GatewayError
from gateway.families import BEARER_HINT, bearer_token, render_default_error

PREFIX = "/imagetask"


class ImagetaskFamily:
    name = "imagetask"
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
        return None  # JSON bodies (base64 images included): ``limits.json_body_bytes``
