"""The image-task family as the core sees it (``gateway.relay.families.WireFamily``): everything under
``/imagetask``, a Bearer credential, and the gateway's default (OpenAI-style) error envelope, as
CONTRACT 5 gives the media families. JSON bodies (base64 images included) have the JSON limit."""

from __future__ import annotations

from gateway.api import BearerFamily

PREFIX = "/imagetask"

WIRE_FAMILY = BearerFamily("imagetask", prefixes=(PREFIX,))
