"""The audio family's endpoints."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.http import endpoint
from translators.audio.family import FAMILY, SPEECH, TRANSCRIPTIONS, TRANSLATIONS
from translators.audio.speech import serve_speech
from translators.audio.transcribe import serve_transcription


@endpoint(FAMILY)
async def transcriptions(request: Request) -> Response:
    return await serve_transcription(request, "transcriptions")


@endpoint(FAMILY)
async def translations(request: Request) -> Response:
    return await serve_transcription(request, "translations")


@endpoint(FAMILY)
async def speech(request: Request) -> Response:
    return await serve_speech(request)


def routes() -> list[BaseRoute]:
    return [Route(TRANSCRIPTIONS, transcriptions, methods=["POST"]),
            Route(TRANSLATIONS, translations, methods=["POST"]),
            Route(SPEECH, speech, methods=["POST"])]
