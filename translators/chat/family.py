"""The chat family as the core sees it (``gateway.relay.families.WireFamily``): a Bearer credential, the
paths it serves, and the gateway's default envelope (the OpenAI shape is the default one)."""

from __future__ import annotations

import re

from gateway.api import BearerFamily

_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
_MODELS = "/v1/models"
# ``/v1/models/{model}:{method}`` (a colon then a method name in the last segment) is the Gemini
# SDK's alias of another family, not a model retrieval of this one.
_MODEL_METHOD = re.compile(r"^/v1/models/[^/]+:[A-Za-z]+$")


class ChatFamily(BearerFamily):
    """Owns its three endpoints and the model list and retrievals, not the Gemini alias."""

    __slots__ = ()

    def owns_path(self, path: str) -> bool:
        if path in _PATHS:
            return True
        return super().owns_path(path) and _MODEL_METHOD.match(path) is None


# The openai SDK's base URL ends with /v1; given the gateway's address alone it calls these, which
# are served as their /v1 forms (CONTRACT 6c).
_UNPREFIXED = frozenset({"/chat/completions", "/completions", "/embeddings", "/models"})
WIRE_FAMILY = ChatFamily("chat", prefixes=(_MODELS,), sdk_base_path="/v1", unprefixed_paths=_UNPREFIXED)
