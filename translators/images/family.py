"""The Images wire family as the core sees it: ``/v1/images/...``, a Bearer key, the OpenAI
envelope. Both endpoints have the JSON body limit (``limits.json_body_bytes``): an edit's upload is
bounded by it too, as it streams in (the core's body-limit middleware)."""

from __future__ import annotations

from gateway.api import BearerFamily

FAMILY = "images"
PREFIX = "/v1/images/"
GENERATIONS = "/v1/images/generations"
EDITS = "/v1/images/edits"
UPSTREAM_PROTOCOL = "chat"  # OpenAI-compatible servers serve /v1/images/... beside /v1/chat/completions

WIRE_FAMILY = BearerFamily(FAMILY, prefixes=(PREFIX,), sdk_base_path="/v1")  # the openai SDK's
