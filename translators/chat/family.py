"""The chat family as the core sees it (``gateway.families.WireFamily``): a Bearer credential, the
paths it serves, and the gateway's default envelope (the OpenAI shape is the default one)."""

from __future__ import annotations

import re

from starlette.requests import HTTPConnection

from gateway.config import LimitsConfig
from gateway.errors import GatewayError
from gateway.families import BEARER_HINT, bearer_token, render_default_error

_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
_MODELS = "/v1/models"
# ``/v1/models/{model}:{method}`` (a colon then a method name in the last segment) is the Gemini
# SDK's alias of another family, not a model retrieval of this one.
_MODEL_METHOD = re.compile(r"^/v1/models/[^/]+:[A-Za-z]+$")


class ChatFamily:
    name = "chat"
    credential_hint = BEARER_HINT

    def owns_path(self, path: str) -> bool:
        if path in _PATHS or path == _MODELS:
            return True
        return path.startswith(_MODELS + "/") and _MODEL_METHOD.match(path) is None

    def credential(self, request: HTTPConnection) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        return None  # no version header on this wire

    def render_error(self, err: GatewayError) -> bytes:
        return render_default_error(err)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return None  # JSON bodies: ``limits.json_body_bytes``
