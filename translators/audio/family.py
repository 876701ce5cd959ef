"""The audio wire family as the core sees it: ``/v1/audio/...``, a Bearer key, the OpenAI envelope,
and an upload limit of ``limits.transcription_bytes`` (plus multipart framing) on the two upload
endpoints. The core's body-limit middleware enforces that limit while the upload streams in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.families import BEARER_HINT, MULTIPART_SLACK, bearer_token, render_default_error

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

    from gateway.config import LimitsConfig
    from gateway.errors import GatewayError

FAMILY = "audio"
PREFIX = "/v1/audio/"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
TRANSLATIONS = "/v1/audio/translations"
SPEECH = "/v1/audio/speech"
UPLOAD_PATHS = frozenset({TRANSCRIPTIONS, TRANSLATIONS})


class AudioFamily:
    name = FAMILY
    credential_hint = BEARER_HINT

    def owns_path(self, path: str) -> bool:
        return path.startswith(PREFIX)

    def credential(self, request: HTTPConnection) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        return None

    def render_error(self, err: GatewayError) -> bytes:
        return render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        if path.rstrip("/") in UPLOAD_PATHS:
            return limits.transcription_bytes + MULTIPART_SLACK
        return None  # speech takes a JSON body: the JSON limit
