"""Field rules of the image-task bodies: each violation a 400 that names the field."""

from __future__ import annotations

from gateway.api import InvalidRequest
from gateway.api.wire import DataURLError, parse_data_url

MAX_PROMPT = 8192
MAX_STATE = 4096
MAX_IMAGES = 5
BOT_TYPES = ("MID_JOURNEY", "NIJI_JOURNEY")
DIMENSIONS = ("PORTRAIT", "SQUARE", "LANDSCAPE")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/jpg", "image/webp", "image/gif")


def bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{field}`: {why}.", param=field)


def prompt(value: str | None, field: str = "prompt", *, required: bool = True) -> str:
    text = (value or "").strip()
    if required and not text:
        raise bad(field, "a non-empty prompt is required")
    if len(text) > MAX_PROMPT:
        raise bad(field, f"at most {MAX_PROMPT} characters")
    return text


def image(value: str, field: str) -> str:
    """A ``data:image/<png|jpeg|webp|gif>;base64,<data>`` URL with valid base64
    (``gateway.wire.data_url``, the one RFC 2397 reader)."""
    try:
        parsed = parse_data_url(value)
    except DataURLError as exc:
        raise bad(field, f"the data URL is malformed: {str(exc).rstrip('.')}") from exc
    if parsed is None or not parsed.base64 or parsed.media_type not in IMAGE_TYPES:
        raise bad(field, "expected a data URL `data:image/<png|jpeg|webp|gif>;base64,<data>`")
    return value


def images(values: list[str], field: str, *, least: int, most: int = MAX_IMAGES) -> list[str]:
    if not least <= len(values) <= most:
        raise bad(field, f"between {least} and {most} images are required" if least
                  else f"at most {most} images")
    return [image(v, f"{field}[{i}]") for i, v in enumerate(values)]


def choice(value: str | None, field: str, allowed: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    upper = value.upper()
    if upper not in allowed:
        raise bad(field, f"one of {', '.join(allowed)}")
    return upper


def hook(value: str | None) -> str | None:
    """The callback URL (its destination is checked by the engine's SSRF guard); "" means none."""
    if value is None or not value.strip():
        return None
    if len(value) > 2048:
        raise bad("notifyHook", "at most 2048 characters")
    return value.strip()


def state(value: str | None) -> str | None:
    if value is not None and len(value) > MAX_STATE:
        raise bad("state", f"at most {MAX_STATE} characters")
    return value


def index(value: int | None, action: str) -> int:
    if action == "REROLL":
        if value is not None and not 1 <= value <= 4:
            raise bad("index", "an integer from 1 to 4")
        return 0
    if value is None:
        raise bad("index", f"{action} needs the index (1-4) of an image of the grid")
    if not 1 <= value <= 4:
        raise bad("index", "an integer from 1 to 4")
    return value


def zoom(value: float) -> str:
    if not 1.0 < value <= 2.0:
        raise bad("zoom", "a zoom-out factor above 1 and at most 2")
    return f"{value:g}"


def task_id(value: str) -> str:
    if not value.strip():
        raise bad("taskId", "the id of an earlier task is required")
    return value.strip()
