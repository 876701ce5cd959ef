"""Video task A as the core sees it (``gateway.relay.families.WireFamily``): everything under ``/videoa``,
a Bearer credential, the default (OpenAI-style) envelope of CONTRACT 5, and the 200 MB body limit
of a submission (``limits.video_submit_bytes``, counted by the body-limit middleware as the body
arrives), since inline videos and audios travel as base64 data URLs."""

from __future__ import annotations

from gateway.api import BearerFamily, LimitsConfig

PREFIX = "/videoa"
SUBMIT_PATH = "/videoa/v1/videos/generations"


def _submit_limit(limits: LimitsConfig) -> int:
    return limits.video_submit_bytes


WIRE_FAMILY = BearerFamily("videoa", prefixes=(PREFIX,), limited_paths=frozenset({SUBMIT_PATH}),
                           limit=_submit_limit)
