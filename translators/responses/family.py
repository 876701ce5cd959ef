"""The Responses family as the core sees it (``gateway.relay.families.WireFamily``): ``/v1/responses``
and everything below it, a Bearer credential (no version header), the OpenAI-style envelope, and
JSON bodies (``limits.json_body_bytes``)."""

from __future__ import annotations

from gateway.api import BearerFamily

PREFIX = "/v1/responses"

# The openai SDK's: its base URL ends with /v1, and /responses without it is served (CONTRACT 6c).
WIRE_FAMILY = BearerFamily("responses", prefixes=(PREFIX,), sdk_base_path="/v1",
                           unprefixed_paths=frozenset({"/responses"}))
