"""The parameters both Images endpoints share, validated: each bad one is a 400 naming it, raised
before any money is held or any upstream asked.

Only what the gateway acts on is checked here: the model (routing, prices), ``n`` (the hold is
``per_image`` times it), ``response_format`` (relayed; the answer's shape depends on it), ``size``
and ``prompt`` (cheap to refuse here rather than upstream), ``stream`` (not served). The other
parameters of the OpenAI Images API (quality, style, background, output_format...) are relayed as
they came: the upstream knows its own models' values, and new ones reach it without a release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.api import InvalidRequest

MAX_IMAGES = 10  # the OpenAI Images API's bound on ``n``
MAX_PROMPT_CHARS = 32_000
MAX_SIDE = 8192  # pixels: far above any model's, a bound on nonsense rather than a model's limit
RESPONSE_FORMATS = ("url", "b64_json")
_SIZE = re.compile(r"^(\d{1,5})x(\d{1,5})$")


@dataclass(frozen=True, slots=True)
class ImageParams:
    model: str
    n: int  # images asked for: the hold is for this many


def _bad(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{param}`: {message}", param=param)


def check_params(*, model: str | None, prompt: str | None, n: int | None, response_format: str | None,
                 size: str | None, stream: bool | None) -> ImageParams:
    if model is None or not model.strip():
        raise InvalidRequest("Missing required parameter: `model`.", param="model")
    if prompt is None:
        raise InvalidRequest("Missing required parameter: `prompt`.", param="prompt")
    if not prompt.strip():
        raise _bad("prompt", "must not be empty.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise _bad("prompt", f"longer than {MAX_PROMPT_CHARS} characters.")
    if n is not None and not 1 <= n <= MAX_IMAGES:
        raise _bad("n", f"must be between 1 and {MAX_IMAGES}.")
    if response_format is not None and response_format not in RESPONSE_FORMATS:
        raise _bad("response_format", f"{response_format!r} is not one of {', '.join(RESPONSE_FORMATS)}.")
    if size is not None and size != "auto":
        match = _SIZE.match(size)
        if match is None or not all(1 <= int(side) <= MAX_SIDE for side in match.groups()):
            raise _bad("size", f"{size!r} is not `auto` or WIDTHxHEIGHT (e.g. 1024x1024).")
    if stream:
        raise _bad("stream", "streamed image generation is not supported; leave `stream` out.")
    return ImageParams(model=model.strip(), n=n if n is not None else 1)


def form_int(name: str, value: str | None) -> int | None:
    """A whole number sent as a form field (``n``)."""
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise _bad(name, f"{value!r} is not a whole number.") from None


def form_bool(name: str, value: str | None) -> bool | None:
    """A boolean sent as a form field (``stream``: the openai SDK writes ``true``/``false``)."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0", ""):
        return False
    raise _bad(name, f"{value!r} is not true or false.")
