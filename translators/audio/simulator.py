"""The simulator's side of the audio API (OpenAI wire), so the family runs offline.

* ``POST /v1/audio/transcriptions`` and ``/translations``: a multipart upload read as it streams,
  its duration from the file's header (``gateway.wire.audio_duration``; 16 kB/s when the header
  says nothing), a deterministic text of about 2.5 words per second, in every response format.
  json answers carry ``usage: {type: "duration", seconds}`` (left out under ``nousage``);
  verbose_json has ``duration`` and segments (and words when asked). A prompt containing
  ``[[duration:N]]`` makes the side report N seconds, whatever the file (to tell the upstream's
  figure from the header's in tests).
* ``POST /v1/audio/speech``: a valid WAV (8 kHz, 16-bit mono tone, about 60 ms per input
  character at speed 1), streamed in 4 kB chunks (``tok``/``cut`` fault options apply to them);
  ``pcm`` gets the raw samples.
"""

from __future__ import annotations

import asyncio
import math
import re
import struct
from fractions import Fraction
from typing import Any

from aiohttp import web

from gateway.api import InvalidRequest
from gateway.api.wire import AudioProbe, MultipartReader, PartData, PartStart, boundary_of
from gateway_simulator.toolkit import (
    BadRequest,
    Ctx,
    Faults,
    SimVendor,
    WebHandler,
    add_route,
    endpoint,
    hookimpl,
    json_response,
    textgen,
)

_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
_DIRECTIVE = re.compile(r"\[\[duration:(\d+(?:\.\d+)?)\]\]")
_RATE = 8000
_CHUNK = 4096


class AudioSide(SimVendor):
    name = "openai-audio"

    def error_body(self, status: int, message: str) -> Any:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}


VENDOR = AudioSide()


def _error(status: int, message: str) -> web.Response:
    return json_response(VENDOR.error_body(status, message), status=status)


async def _read_form(request: web.Request) -> tuple[dict[str, str], list[str], AudioProbe, bool]:
    """The form, through the gateway's own incremental reader (the simulator's request log has
    already read the body; it is fed in slices all the same)."""
    fields: dict[str, str] = {}
    granularities: list[str] = []
    probe = AudioProbe()
    got_file = False
    reader = MultipartReader(boundary_of(request.headers.get("Content-Type")))
    raw = await request.read()
    current: str | None = None
    value = bytearray()
    for start in range(0, len(raw), _CHUNK):
        for event in reader.feed(raw[start:start + _CHUNK]):
            if isinstance(event, PartStart):
                current, value = event.name, bytearray()
                got_file = got_file or current == "file"
            elif isinstance(event, PartData):
                if current == "file":
                    probe.feed(event.data)
                else:
                    value += event.data
            elif current is not None and current != "file":
                text = value.decode("utf-8", "replace")
                if current == "timestamp_granularities[]":
                    granularities.append(text)
                else:
                    fields[current] = text
    reader.close()
    return fields, granularities, probe, got_file


def _stamp(seconds: float, sep: str) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def _transcript(model: str, seconds: float, size: int) -> tuple[list[str], list[dict[str, Any]]]:
    words = [w.strip(" .") for w in textgen.word_pieces(max(3, min(400, round(seconds * 2.5))),
                                                        textgen.seed_of("stt", model, str(size)))]
    per_segment = 8
    segments: list[dict[str, Any]] = []
    step = seconds / max(len(words), 1)
    for n, start in enumerate(range(0, len(words), per_segment)):
        chunk = words[start:start + per_segment]
        segments.append({"id": n, "seek": 0, "start": round(start * step, 3),
                         "end": round((start + len(chunk)) * step, 3), "text": " " + " ".join(chunk),
                         "tokens": [], "temperature": 0.0, "avg_logprob": -0.2,
                         "compression_ratio": 1.2, "no_speech_prob": 0.01})
    return words, segments


def _render(fmt: str, task: str, language: str, seconds: float, words: list[str],
            segments: list[dict[str, Any]], granularities: list[str], usage: bool) -> web.Response:
    text = " ".join(words) + "."
    if fmt == "text":
        return web.Response(text=text + "\n", content_type="text/plain")
    if fmt in ("srt", "vtt"):
        sep = "," if fmt == "srt" else "."
        cues = [(f"{s['id'] + 1}\n" if fmt == "srt" else "")
                + f"{_stamp(s['start'], sep)} --> {_stamp(s['end'], sep)}\n{s['text'].strip()}\n"
                for s in segments]
        body = ("WEBVTT\n\n" if fmt == "vtt" else "") + "\n".join(cues)
        return web.Response(text=body, content_type="text/plain")
    if fmt == "verbose_json":
        payload: dict[str, Any] = {"task": task, "language": language, "duration": seconds, "text": text}
        if not granularities or "segment" in granularities:
            payload["segments"] = segments
        if "word" in granularities:
            step = seconds / max(len(words), 1)
            payload["words"] = [{"word": w, "start": round(i * step, 3), "end": round((i + 1) * step, 3)}
                                for i, w in enumerate(words)]
        return json_response(payload)
    payload = {"text": text}
    if usage:
        payload["usage"] = {"type": "duration", "seconds": math.ceil(seconds)}
    return json_response(payload)


def _transcription_handler(task: str) -> WebHandler:
    async def handle(request: web.Request) -> web.StreamResponse:
        key = VENDOR.extract_key(request)
        if not key:
            return _error(401, "missing API key (simulator accepts any non-empty key)")
        if not request.content_type.startswith("multipart/"):
            return _error(400, "the body must be multipart/form-data")
        try:
            fields, granularities, probe, got_file = await _read_form(request)
        except InvalidRequest as exc:
            return _error(400, f"malformed multipart body: {exc.message}")
        model = fields.get("model", "")
        faults = Faults.parse(key, model)
        if faults.hang:
            await asyncio.sleep(3600)
        if faults.fail is not None:
            return _error(faults.fail, "simulated failure")
        if not model:
            return _error(400, "model: required")
        if not got_file or probe.format is None:
            return _error(400, "Invalid file format. Supported formats: mp3, mp4, mpeg, mpga, m4a, wav, webm")
        fmt = fields.get("response_format") or "json"
        if fmt not in _FORMATS:
            return _error(400, f"response_format: unsupported {fmt!r}")
        reported = _DIRECTIVE.search(fields.get("prompt", ""))
        duration = probe.seconds() or Fraction(max(probe.size, 1), 16000)
        seconds = float(reported.group(1)) if reported else round(float(duration), 3)
        words, segments = _transcript(model, seconds, probe.size)
        language = "english" if task == "translate" else (fields.get("language") or "english")
        return _render(fmt, task, language, seconds, words, segments, granularities, not faults.nousage)

    return handle


def wav_bytes(seconds: float) -> bytes:
    """A mono 16-bit WAV of a 440 Hz tone."""
    frames = max(1, int(_RATE * seconds))
    samples = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / _RATE)))
                       for i in range(frames))
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(samples), b"WAVE", b"fmt ", 16, 1, 1,
                         _RATE, _RATE * 2, 2, 16, b"data", len(samples))
    return header + samples


async def speech(ctx: Ctx) -> web.StreamResponse:
    text = ctx.body.get("input")
    voice = ctx.body.get("voice")
    if not isinstance(text, str) or not text:
        raise BadRequest("input: required")
    if not voice:
        raise BadRequest("voice: required")
    speed = ctx.body.get("speed") or 1.0
    seconds = min(0.06 * len(text) / float(speed), 10.0)
    audio = wav_bytes(seconds)
    pcm = ctx.body.get("response_format") == "pcm"
    if pcm:
        audio = audio[44:]
    await ctx.start_stream("audio/pcm" if pcm else "audio/wav")
    for start in range(0, len(audio), _CHUNK):
        await ctx.send(audio[start:start + _CHUNK])
    return ctx.stream()


@hookimpl
def gateway_simulator_routes(app: web.Application) -> None:
    register(app)


def register(app: web.Application) -> None:
    add_route(app, "POST", "/v1/audio/transcriptions", _transcription_handler("transcribe"))
    add_route(app, "POST", "/v1/audio/translations", _transcription_handler("translate"))
    add_route(app, "POST", "/v1/audio/speech", endpoint(VENDOR, speech))
