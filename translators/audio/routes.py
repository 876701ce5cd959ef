"""The audio family's endpoints."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import MULTIPART, documented, endpoint
from translators.audio.family import FAMILY, SPEECH, TRANSCRIPTIONS, TRANSLATIONS
from translators.audio.form import GRANULARITIES, GRANULARITY_FIELD, RESPONSE_FORMATS
from translators.audio.speech import SpeechRequest, serve_speech
from translators.audio.transcribe import serve_transcription

# The form as it arrives (``form.TranscriptionForm`` is what it becomes, the file read apart).
UPLOAD_FORM = {"type": "object", "required": ["file", "model"], "properties": {
    "file": {"type": "string", "contentMediaType": "application/octet-stream"},
    "model": {"type": "string"}, "language": {"type": "string"}, "prompt": {"type": "string"},
    "response_format": {"enum": list(RESPONSE_FORMATS)}, "temperature": {"type": "number"},
    GRANULARITY_FIELD: {"type": "array", "items": {"enum": list(GRANULARITIES)}}}}


@endpoint(FAMILY)
@documented("Transcribe audio", request=UPLOAD_FORM, media_type=MULTIPART)
async def transcriptions(request: Request) -> Response:
    return await serve_transcription(request, "transcriptions")


@endpoint(FAMILY)
@documented("Translate audio into English", request=UPLOAD_FORM, media_type=MULTIPART)
async def translations(request: Request) -> Response:
    return await serve_transcription(request, "translations")


@endpoint(FAMILY)
@documented("Speak text", request=SpeechRequest)
async def speech(request: Request) -> Response:
    return await serve_speech(request)


def routes() -> list[BaseRoute]:
    return [Route(TRANSCRIPTIONS, transcriptions, methods=["POST"]),
            Route(TRANSLATIONS, translations, methods=["POST"]),
            Route(SPEECH, speech, methods=["POST"])]
