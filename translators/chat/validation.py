"""Decoding client JSON with errors that name the offending field (``messages[2].role``)."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from gateway.errors import InvalidRequest

T = TypeVar("T")

_AT_PATH = re.compile(r" - at `\$\.?(.*)`$")
_MISSING = re.compile(r"Object missing required field `(.+)`")


def field_error(exc: msgspec.MsgspecError) -> InvalidRequest:
    """A msgspec error as a 400 naming the field: ``Expected `float` <= 2.0 - at `$.temperature```
    becomes "Invalid value for `temperature`: expected `float` <= 2.0"."""
    if not isinstance(exc, msgspec.ValidationError):
        return InvalidRequest(f"The request body is not valid JSON: {exc}")
    text = str(exc)
    match = _AT_PATH.search(text)
    where = match.group(1) if match else ""
    detail = text[: match.start()] if match else text
    missing = _MISSING.match(detail)
    if missing:
        field = f"{where}.{missing.group(1)}" if where else missing.group(1)
        return InvalidRequest(f"Missing required parameter: `{field}`.", param=field)
    if not where:
        return InvalidRequest(f"The request body must be a JSON object ({detail[:1].lower()}{detail[1:]}).")
    return InvalidRequest(f"Invalid value for `{where}`: {detail[:1].lower()}{detail[1:]}.", param=where)


def decode(decoder: msgspec.json.Decoder[T], body: bytes) -> T:
    try:
        return decoder.decode(body)
    except msgspec.MsgspecError as exc:
        raise field_error(exc) from exc
    except UnicodeDecodeError as exc:  # invalid UTF-8 inside a string: msgspec does not wrap it
        raise InvalidRequest("The request body is not valid UTF-8 JSON.") from exc
    except RecursionError as exc:  # msgspec's depth limit
        raise InvalidRequest("The request body is not valid JSON: it is nested too deeply.") from exc


def unknown_fields(top: dict[str, msgspec.Raw], known: frozenset[str]) -> dict[str, Any]:
    """The top-level fields a translator does not map, decoded, for ``ChatRequest.extra``."""
    extra: dict[str, Any] = {}
    for key, raw in top.items():
        if key not in known:
            try:
                extra[key] = msgspec.json.decode(raw)
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # only skipped by the decoders above
                raise InvalidRequest(f"Invalid value for `{key}`: it is not valid UTF-8 JSON ({exc}).",
                                     param=key) from exc
    return extra


def require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise InvalidRequest(message, param=param)


def stop_list(stop: str | list[str] | None) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else list(stop)
