"""Music tasks as the core sees them (``gateway.relay.families.WireFamily``): everything under
``/music``, a Bearer credential and the default (OpenAI-style) envelope of CONTRACT 5."""

from __future__ import annotations

from gateway.api import BearerFamily

PREFIX = "/music"

WIRE_FAMILY = BearerFamily("music", prefixes=(PREFIX,))
