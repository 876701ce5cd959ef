"""The rules of a video-B creation (spec 4.11), each violation a 400 naming the field, and the
form a body may come in: JSON (spec 4.11) or ``multipart/form-data`` (what the openai SDK sends,
with ``input_reference`` as an uploaded file, kept as a data URL).

Choices where the spec is silent: ``seconds`` is 1-20 (default 5; the openai SDK's "4", "8" and
"12" fit); ``size`` is ``<width>x<height>`` with each side 64-4096; ``n`` may only be 1 (spec:
"partially supported": the upstream makes one video per task); ``input_reference`` holds exactly
one of ``image_url``, ``video_url`` (public http(s) or a base64 data URL of that kind) or
``file_id``.
"""

from __future__ import annotations

import base64
import re

import msgspec

from gateway.api import InvalidRequest, decode_body, field_error
from gateway.api.wire import (
    DECODE_FAULTS,
    DataURLError,
    MultipartReader,
    PartData,
    PartEnd,
    PartStart,
    boundary_of,
    data_url,
    parse_data_url,
    public_url_problem,
)
from translators.videos.wire import CreateBody, InputReference

MIN_SECONDS, MAX_SECONDS, DEFAULT_SECONDS = 1, 20, 5
ASPECT_RATIOS = ("16:9", "9:16", "1:1")
MAX_PROMPT = 10_000
_SIZE = re.compile(r"^(\d{2,4})x(\d{2,4})$")
_FILE_FIELD = "input_reference"


def bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{field}`: {why}.", param=field)


def parse_body(raw: bytes, content_type: str | None) -> CreateBody:
    """The body as JSON, or as a multipart form (text fields, and the reference file)."""
    if not (content_type or "").lower().startswith("multipart/"):
        return decode_body(raw, CreateBody)
    reader = MultipartReader(boundary_of(content_type))
    fields: dict[str, object] = {}
    name, kind, data = "", "", bytearray()
    for event in reader.feed(raw):
        if isinstance(event, PartStart):
            name, kind, data = event.name, event.content_type or "", bytearray()
            if name != _FILE_FIELD and event.filename is not None:
                raise bad(name, "only `input_reference` may be a file")
        elif isinstance(event, PartData):
            data += event.data
        elif isinstance(event, PartEnd):
            if name == _FILE_FIELD:
                fields[name] = {_reference_key(kind): data_url(kind, base64.b64encode(data).decode())}
            else:
                fields[name] = data.decode("utf-8", "replace")
    reader.close()
    try:
        return msgspec.convert(fields, CreateBody, strict=False)
    except DECODE_FAULTS as exc:
        raise field_error(exc) from exc


def _reference_key(content_type: str) -> str:
    if content_type.lower().startswith("video/"):
        return "video_url"
    if not content_type.lower().startswith("image/"):
        raise bad(_FILE_FIELD, "an image/* or video/* file is required")
    return "image_url"


def prompt(value: str) -> str:
    text = value.strip()
    if not text:
        raise bad("prompt", "a non-empty prompt is required")
    if len(text) > MAX_PROMPT:
        raise bad("prompt", f"at most {MAX_PROMPT} characters")
    return text


def seconds(value: int | str | None) -> int:
    if value is None:
        return DEFAULT_SECONDS
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise bad("seconds", "a whole number of seconds")
        value = int(value)
    if not MIN_SECONDS <= value <= MAX_SECONDS:
        raise bad("seconds", f"whole seconds from {MIN_SECONDS} to {MAX_SECONDS}")
    return value


def size(value: str | None) -> str | None:
    if value is None:
        return None
    match = _SIZE.match(value.strip())
    if match is None or not all(64 <= int(side) <= 4096 for side in match.groups()):
        raise bad("size", "`<width>x<height>` in pixels, each from 64 to 4096 (e.g. 1280x720)")
    return value.strip()


def aspect_ratio(value: str | None) -> str | None:
    if value is not None and value not in ASPECT_RATIOS:
        raise bad("aspect_ratio", f"one of {', '.join(ASPECT_RATIOS)}")
    return value


def n(value: int | None) -> None:
    if value is not None and value != 1:
        raise bad("n", "only 1 video per task is supported")


def _link(url: str, field: str, kind: str) -> None:
    try:
        parsed = parse_data_url(url)
    except DataURLError as exc:
        raise bad(field, f"a malformed data URL: {exc}") from exc
    if parsed is None:
        if (problem := public_url_problem(url)) is not None:
            raise bad(field, problem)
    elif not parsed.base64 or parsed.media_type.split("/", 1)[0] != kind or not parsed.data:
        raise bad(field, f"expected a base64 {kind}/* data URL")


def reference(value: InputReference | None) -> InputReference | None:
    if value is None:
        return None
    given = [k for k in ("image_url", "video_url", "file_id") if getattr(value, k) is not None]
    if len(given) != 1:
        raise bad(_FILE_FIELD, "exactly one of `image_url`, `video_url` or `file_id`")
    if value.image_url is not None:
        _link(value.image_url, f"{_FILE_FIELD}.image_url", "image")
    elif value.video_url is not None:
        _link(value.video_url, f"{_FILE_FIELD}.video_url", "video")
    elif not (value.file_id or "").strip():
        raise bad(f"{_FILE_FIELD}.file_id", "a non-empty file id")
    return value
