"""The audio wire family as the core sees it: ``/v1/audio/...``, a Bearer key, the OpenAI envelope,
and an upload limit of ``limits.transcription_bytes`` (plus multipart framing) on the two upload
endpoints. The core's body-limit middleware enforces that limit while the upload streams in;
speech takes a JSON body: the JSON limit."""

from __future__ import annotations

from gateway.api import MULTIPART_SLACK, BearerFamily, LimitsConfig

FAMILY = "audio"
PREFIX = "/v1/audio/"
TRANSCRIPTIONS = "/v1/audio/transcriptions"
TRANSLATIONS = "/v1/audio/translations"
SPEECH = "/v1/audio/speech"
UPLOAD_PATHS = frozenset({TRANSCRIPTIONS, TRANSLATIONS})


def _upload_limit(limits: LimitsConfig) -> int:
    return limits.transcription_bytes + MULTIPART_SLACK


WIRE_FAMILY = BearerFamily(FAMILY, prefixes=(PREFIX,), limited_paths=UPLOAD_PATHS, limit=_upload_limit,
                           sdk_base_path="/v1")  # the openai SDK's
