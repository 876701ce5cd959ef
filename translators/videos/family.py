"""Video task B as the core sees it (``gateway.relay.families.WireFamily``): ``/v1/videos`` and below, a
Bearer credential and the default (OpenAI-style) envelope of CONTRACT 5. Bodies are JSON or a small
multipart form (a reference image): the JSON limit."""

from __future__ import annotations

from gateway.api import BearerFamily

PREFIX = "/v1/videos"

WIRE_FAMILY = BearerFamily("videos", prefixes=(PREFIX,), sdk_base_path="/v1")  # the openai SDK's
