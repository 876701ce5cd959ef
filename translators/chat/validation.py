"""Checks of a chat client's request beyond what its Structs express (decoding itself, with errors
that name the field, is ``gateway.wire.decode``)."""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api import InvalidRequest


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
