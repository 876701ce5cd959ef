"""Small mappings between the Ollama wire and the canonical model: stop reasons, usage, think,
image media types, timestamps and ids."""

from __future__ import annotations

import base64
import binascii
import datetime
import secrets

from gateway.api import InvalidRequest
from gateway.api.canonical import StopReason, Thinking, Usage

EFFORTS = ("low", "medium", "high")

# Magic prefixes of base64-encoded images (Ollama sends bare base64 without a media type).
_IMAGE_MAGIC = (("iVBORw0KGgo", "image/png"), ("/9j/", "image/jpeg"), ("R0lGOD", "image/gif"),
                ("UklGR", "image/webp"))


def done_reason(stop: StopReason | None) -> str:
    """Ollama says ``length`` when the output ceiling was hit and ``stop`` for every other end
    (a tool call included)."""
    return "length" if stop == "max_tokens" else "stop"


def stop_reason(reason: str | None, called_tool: bool) -> StopReason:
    if reason == "length":
        return "max_tokens"
    return "tool_use" if called_tool else "end_turn"


def usage_of(prompt_eval_count: int | None, eval_count: int | None) -> Usage | None:
    """Usage from a final answer; None when the upstream reported neither count."""
    if prompt_eval_count is None and eval_count is None:
        return None
    return Usage(input_tokens=prompt_eval_count or 0, output_tokens=eval_count or 0)


def thinking_of(think: bool | str | None) -> Thinking | None:
    """``think: true`` or an effort level; ``false`` or absent: no thinking asked for."""
    if think is None or think is False:
        return None
    if think is True:
        return Thinking(enabled=True)
    return Thinking(enabled=True, effort=think)


def think_of(thinking: Thinking | None) -> bool | str | None:
    if thinking is None:
        return None
    if not thinking.enabled:
        return False
    return thinking.effort if thinking.effort in EFFORTS else True


def image_media_type(data: str, field: str) -> str:
    """The media type of a base64 image, from its first bytes; 400 naming ``field`` when the
    string is not base64 at all."""
    try:
        base64.b64decode(data[:64] + "=" * (-len(data[:64]) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest(f"Invalid value for `{field}`: images must be base64-encoded.",
                             param=field) from exc
    for prefix, media_type in _IMAGE_MAGIC:
        if data.startswith(prefix):
            return media_type
    return "image/png"


def created_at(epoch_s: float | None = None) -> str:
    """Ollama's timestamp form: RFC 3339, UTC, ``Z``."""
    moment = (datetime.datetime.fromtimestamp(epoch_s, datetime.UTC) if epoch_s
              else datetime.datetime.now(datetime.UTC))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch_of(stamp: str) -> int:
    """Seconds since the epoch of an Ollama timestamp (now when it cannot be read)."""
    try:
        text = stamp.replace("Z", "+00:00")
        if "." in text:  # Go writes nanoseconds; Python reads at most microseconds
            head, _, rest = text.partition(".")
            digits = "".join(c for c in rest if c.isdigit())
            zone = rest[len(digits):]
            text = f"{head}.{digits[:6]}{zone}"
        return int(datetime.datetime.fromisoformat(text).timestamp())
    except ValueError:
        return int(datetime.datetime.now(datetime.UTC).timestamp())


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"
