"""Video task A as the core sees it (``gateway.families.WireFamily``): everything under ``/videoa``,
a Bearer credential, the default (OpenAI-style) envelope of CONTRACT 5, and the 200 MB body limit
of a submission (``limits.video_submit_bytes``, counted by the body-limit middleware as the body
arrives), since inline videos and audios travel as base64 data URLs."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from gateway.config import LimitsConfig
from gateway.errors import GatewayError
from gateway.families import BEARER_HINT, bearer_token, render_default_error

PREFIX = "/videoa"
SUBMIT_PATH = "/videoa/v1/videos/generations"


class VideoaFamily:
    name = "videoa"
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
        return limits.video_submit_bytes if path.rstrip("/") == SUBMIT_PATH else None
