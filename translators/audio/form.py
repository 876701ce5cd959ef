"""The speech-to-text form (spec 4.6): every field validated, each bad one a 400 naming it.

Text fields arrive as ``(name, value)`` pairs in the order of the body; the file is checked apart
(``check_file``): its extension, when it has one, and its magic bytes (``gateway.wire.audio_duration
.sniff``) must both say an accepted container, so a renamed PDF is refused before any upstream sees it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from gateway.api import InvalidRequest

Task = Literal["transcriptions", "translations"]

RESPONSE_FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("word", "segment")
EXTENSIONS = frozenset({"mp3", "mp4", "mpeg", "mpga", "m4a", "wav", "webm"})
# What the magic bytes may say (an .mpeg may be MPEG audio or an MPEG stream; .mp4/.m4a share a box).
FORMATS = frozenset({"mp3", "mp4", "wav", "webm", "mpeg"})
GRANULARITY_FIELD = "timestamp_granularities[]"
MAX_FIELD_BYTES = 64 * 1024
MAX_PROMPT_CHARS = 16 * 1024

# ISO 639-1: every two-letter code.
ISO_639_1 = frozenset("""
aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv
dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig
ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh
mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru
rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug
uk ur uz ve vi vo wa wo xh yi yo za zh zu""".split())


@dataclass
class TranscriptionForm:
    model: str
    language: str | None = None
    prompt: str | None = None
    response_format: str = "json"
    temperature: float | None = None
    granularities: list[str] = field(default_factory=list)

    def upstream_fields(self, task: Task, upstream_model: str) -> list[tuple[str, str]]:
        """The text fields sent upstream, the model under the id the upstream knows it by.
        Translations take neither a language (the output is English) nor timestamps."""
        fields = [("model", upstream_model), ("response_format", self.response_format)]
        if self.prompt is not None:
            fields.append(("prompt", self.prompt))
        if self.temperature is not None:
            fields.append(("temperature", repr(self.temperature)))
        if task == "transcriptions":
            if self.language is not None:
                fields.append(("language", self.language))
            fields += [(GRANULARITY_FIELD, g) for g in self.granularities]
        return fields


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{param}`: {message}", param=param)


def parse_form(pairs: list[tuple[str, str]], *, complete: bool = True) -> TranscriptionForm:
    """Validate the text fields. ``complete=False`` checks the fields that came before the file
    (to refuse early); ``model`` may then still be to come ("" in the answer)."""
    seen: dict[str, str] = {}
    granularities: list[str] = []
    for name, value in pairs:
        if name in (GRANULARITY_FIELD, "timestamp_granularities"):
            if value not in GRANULARITIES:
                raise _bad(GRANULARITY_FIELD, f"{value!r} is not one of {', '.join(GRANULARITIES)}.")
            if value not in granularities:
                granularities.append(value)
            continue
        if name == "stream":
            if value.lower() not in ("false", "0", ""):
                raise _bad("stream", "streamed transcriptions are not supported; leave `stream` out.")
            continue
        if name not in ("model", "language", "prompt", "response_format", "temperature"):
            raise InvalidRequest(f"Unknown form field `{name}`.", param=name)
        if name in seen:
            raise _bad(name, "the field is given more than once.")
        seen[name] = value
    model = seen.get("model", "").strip()
    if not model and (complete or "model" in seen):
        raise InvalidRequest("Missing required form field `model`.", param="model")
    form = TranscriptionForm(model=model, granularities=granularities)
    language = seen.get("language", "").strip()
    if language:
        if language.lower() not in ISO_639_1:
            raise _bad("language", f"{language!r} is not an ISO-639-1 code (two letters, e.g. `en`).")
        form.language = language.lower()
    if "prompt" in seen:
        if len(seen["prompt"]) > MAX_PROMPT_CHARS:
            raise _bad("prompt", f"longer than {MAX_PROMPT_CHARS} characters.")
        form.prompt = seen["prompt"]
    response_format = seen.get("response_format", "json").strip() or "json"
    if response_format not in RESPONSE_FORMATS:
        raise _bad("response_format", f"{response_format!r} is not one of {', '.join(RESPONSE_FORMATS)}.")
    form.response_format = response_format
    if "temperature" in seen:
        try:
            temperature = float(seen["temperature"])
        except ValueError:
            raise _bad("temperature", f"{seen['temperature']!r} is not a number.") from None
        if not (math.isfinite(temperature) and 0.0 <= temperature <= 1.0):
            raise _bad("temperature", "must be between 0 and 1.")
        form.temperature = temperature
    if granularities and (complete or "response_format" in seen) and response_format != "verbose_json":
        raise _bad(GRANULARITY_FIELD, "timestamp granularities require `response_format` verbose_json.")
    return form


def check_filename(filename: str | None) -> None:
    """The file part exists and, when its name has an extension, it is an accepted one."""
    if filename is None:
        raise InvalidRequest("The `file` field must be a file upload (a part with a filename).", param="file")
    _, dot, extension = filename.rpartition(".")
    if dot and extension.lower() not in EXTENSIONS:
        raise _bad("file", f"the file type .{extension.lower()} is not supported; use one of "
                   f"{', '.join(sorted(EXTENSIONS))}.")


def check_format(detected: str | None, size: int) -> None:
    """The magic bytes name an accepted container."""
    if size == 0:
        raise _bad("file", "the file is empty.")
    if detected not in FORMATS:
        raise _bad("file", "the file is not audio in a supported format "
                   f"({', '.join(sorted(EXTENSIONS))}).")
