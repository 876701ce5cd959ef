"""The Ollama family as the core sees it (``gateway.api.WireFamily``).

Ollama itself has no authentication; in front of a shared server (and on Ollama's cloud) the key
rides as ``Authorization: Bearer <key>``, which is what the official client sends when given
``headers=`` or the ``OLLAMA_API_KEY`` environment variable. Errors are Ollama's ``{"error":
"<message>"}``, with the gateway's snake_case ``code`` beside it (the client reads ``error`` only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson
from gateway.api import bearer_token

if TYPE_CHECKING:
    from gateway.api import GatewayError, LimitsConfig
    from starlette.requests import HTTPConnection

PATHS = frozenset({"/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/tags"})


class OllamaFamily:
    name = "ollama"
    credential_hint = "the Authorization header (Bearer <key>)"

    def owns_path(self, path: str) -> bool:
        # Exact paths only: other plugins serve ``/api/...`` paths of their own (account endpoints).
        return path in PATHS

    def credential(self, request: HTTPConnection) -> str | None:
        return bearer_token(request)

    def check_headers(self, request: HTTPConnection) -> None:
        return None  # no version header on this wire

    def render_error(self, err: GatewayError) -> bytes:
        body: dict[str, str] = {"error": err.message, "code": err.code}
        if err.param is not None:
            body["param"] = err.param
        return orjson.dumps(body)

    def body_limit(self, path: str, limits: LimitsConfig) -> int | None:
        return None  # JSON bodies (base64 images included): ``limits.json_body_bytes``
