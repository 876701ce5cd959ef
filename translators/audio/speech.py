"""``POST /v1/audio/speech`` (text to speech, the OpenAI wire): validated, relayed to a ``chat``
upstream, the audio streamed back chunk by chunk as it comes, billed per input character.

The response is a plain ASGI callable for the same reasons as the text relay's (``gateway.
relay_stream``): ``await send`` gives the client's backpressure to the upstream read, and a
disconnect stops the upstream. Charge by ending: the input's characters at ``per_mchar`` when the
audio was sent (``success``) or the client left while it was (``client_disconnect``: the upstream
did the work); nothing when the upstream broke off (``upstream_cut``, a failed call).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway.api import GatewayError, InvalidRequest, UpstreamCall, decode_body, get_gateway, read_json_body
from gateway.api.accounts import Outcome
from gateway.api.relay import (
    CallContext,
    Target,
    UpstreamAnswer,
    UpstreamFailure,
    attempt,
    start_stream,
    upstream_io,
)
from translators.audio import billing
from translators.audio.family import FAMILY, SPEECH
from translators.audio.transcribe import admit, audio_targets, fail

MAX_INPUT_CHARS = 4096
MAX_INSTRUCTIONS_CHARS = 4096
_MEDIA_TYPES = {"mp3": "audio/mpeg", "opus": "audio/opus", "aac": "audio/aac", "flac": "audio/flac",
                "wav": "audio/wav", "pcm": "audio/pcm"}


class VoiceId(msgspec.Struct, forbid_unknown_fields=True):
    id: str


class SpeechRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    model: str
    input: str
    voice: str | VoiceId
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float | None = None
    instructions: str | None = None
    stream_format: Literal["audio", "sse"] | None = None


_encode = msgspec.json.Encoder()


def parse_speech(body: bytes) -> SpeechRequest:
    speech = decode_body(body, SpeechRequest)
    if not speech.model.strip():
        raise InvalidRequest("Invalid value for `model`: must not be empty.", param="model")
    if not speech.input.strip():
        raise InvalidRequest("Invalid value for `input`: must not be empty.", param="input")
    if len(speech.input) > MAX_INPUT_CHARS:
        raise InvalidRequest(f"Invalid value for `input`: longer than {MAX_INPUT_CHARS} characters.",
                             param="input")
    voice = speech.voice.id if isinstance(speech.voice, VoiceId) else speech.voice
    if not voice.strip():
        raise InvalidRequest("Invalid value for `voice`: must not be empty.", param="voice")
    if speech.speed is not None and not 0.25 <= speech.speed <= 4.0:
        raise InvalidRequest("Invalid value for `speed`: must be between 0.25 and 4.0.", param="speed")
    if speech.instructions is not None and len(speech.instructions) > MAX_INSTRUCTIONS_CHARS:
        raise InvalidRequest(f"Invalid value for `instructions`: longer than {MAX_INSTRUCTIONS_CHARS} "
                             "characters.", param="instructions")
    return speech


async def serve_speech(request: Request) -> Response:
    gw = get_gateway(request)
    ctx: CallContext | None = None
    try:
        principal = await gw.auth.authenticate(request, FAMILY)
        speech = parse_speech(await read_json_body(request))
        ctx = admit(request, principal, speech.model, stream=True)
        characters = len(speech.input)
        charge = billing.speech_cost(ctx.prices, characters, ctx.ratio)
        await ctx.reserve(charge)
        targets = audio_targets(gw, speech.model, ctx.route)

        def build(target: Target) -> UpstreamCall:
            upstream = msgspec.structs.replace(speech, model=target.upstream_model)
            return UpstreamCall(path=SPEECH, body=_encode.encode(upstream))

        target, (response, first) = await attempt(ctx, targets, build, start_stream)
        media_type = response.headers.get("Content-Type") or _MEDIA_TYPES[speech.response_format]
        return SpeechStream(ctx, target, response, first, media_type, charge)
    except GatewayError as err:
        return fail(request, ctx, err)
    except Exception:
        if ctx is not None:
            ctx.finish(500, "gateway_error", error_code="internal_error")
        raise


class SpeechStream(Response):
    """The ASGI response that relays the upstream's audio bytes as they come (see module doc); a
    Response only so that a route may return it (it writes its own start and body)."""

    def __init__(self, ctx: CallContext, target: Target, response: UpstreamAnswer, first: bytes,
                 media_type: str, charge: int) -> None:  # no super().__init__: no body to render
        self.status_code = 200
        self.background = None
        self._ctx = ctx
        self._target = target
        self._response = response
        self._first = first
        self._media_type = media_type
        self._charge = charge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        outcome: Outcome = "client_disconnect"
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch_disconnect(receive))
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", self._media_type.encode("latin-1"))]})
            done, _ = await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
            if pump in done:
                outcome = pump.result()
        finally:
            for task in (pump, watch):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError, UpstreamFailure):
                    await task
            self._response.close()  # drops the connection: an unfinished upstream stops
            cut = outcome == "upstream_cut"
            self._ctx.finish(200, outcome, charge_nano=0 if cut else self._charge,
                             error_code="upstream_error" if cut else None)

    @staticmethod
    async def _watch_disconnect(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _pump(self, send: Send) -> Outcome:
        await send({"type": "http.response.body", "body": self._first, "more_body": True})
        try:
            with upstream_io(self._target.name, "mid-stream"):
                while chunk := await self._response.readany():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except UpstreamFailure:
            # A raw audio stream has no error frame: the body is left unfinished, so the server
            # drops the connection and the client sees a truncated transfer, not a short file.
            return "upstream_cut"
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return "success"
