"""Decoding a client's JSON body into a msgspec type, with errors that name the field.

Every family decodes through ``decode`` (a prebuilt ``msgspec.json.Decoder``, the fast way) or
``decode_body`` (a type), so the same fault gets the same 400 message on every family:

* not JSON: "The request body is not valid JSON: <where it broke>."
* bad UTF-8 inside a string (msgspec raises UnicodeDecodeError, not DecodeError): "... is not
  valid UTF-8 JSON."; nesting past msgspec's depth limit (RecursionError): "... nested too deeply."
* a missing field: "Missing required parameter: `messages[0].role`." (``param`` names it);
* an unknown field (Structs that forbid them): "Unknown parameter: `tools[1].x`.";
* a wrong value: "Invalid value for `temperature`: expected `float` <= 2.0."
* a body of the wrong JSON type: "Invalid request body: expected `object`, got `array`."
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec

from gateway.runtime.errors import InvalidRequest

T = TypeVar("T")

DECODE_FAULTS = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError)

_AT_PATH = re.compile(r" - at `\$\.?(.*)`$")
_NAMED = re.compile(r"Object (missing required|contains unknown) field `(.+)`$")


def field_error(exc: BaseException) -> InvalidRequest:
    """A decoding failure of a client's body (one of ``DECODE_FAULTS``) as a 400 naming the field."""
    if isinstance(exc, UnicodeDecodeError):
        return InvalidRequest("The request body is not valid UTF-8 JSON.")
    if isinstance(exc, RecursionError):
        return InvalidRequest("The request body is not valid JSON: it is nested too deeply.")
    if not isinstance(exc, msgspec.ValidationError):
        return InvalidRequest(f"The request body is not valid JSON: {_sentence(str(exc))}")
    text = str(exc)
    match = _AT_PATH.search(text)
    where = match.group(1) if match else ""
    detail = text[: match.start()] if match else text
    named = _NAMED.match(detail)
    if named:
        field = f"{where}.{named.group(2)}" if where else named.group(2)
        kind = "Missing required" if named.group(1) == "missing required" else "Unknown"
        return InvalidRequest(f"{kind} parameter: `{field}`.", param=field)
    if not where:
        return InvalidRequest(f"Invalid request body: {_sentence(detail)}")
    return InvalidRequest(f"Invalid value for `{where}`: {_sentence(detail)}", param=where)


def _sentence(detail: str) -> str:
    """msgspec's ``Expected `int`, got `str``` as the tail of our sentence."""
    if detail[1:2].islower():  # "Expected ..." -> "expected ...", but "JSON is ..." stays
        detail = detail[:1].lower() + detail[1:]
    return detail if detail.endswith(".") else detail + "."


def decode(decoder: msgspec.json.Decoder[T], body: bytes) -> T:
    """``decoder.decode(body)``; InvalidRequest (naming the field) for any fault of the body."""
    try:
        return decoder.decode(body)
    except DECODE_FAULTS as exc:
        raise field_error(exc) from exc


def decode_body(body: bytes, type_: type[T]) -> T:
    """Decode JSON ``body`` into ``type_`` (a msgspec Struct); InvalidRequest names the field.
    (Hot paths build their ``msgspec.json.Decoder`` once and call ``decode``.)"""
    try:
        return msgspec.json.decode(body, type=type_)
    except DECODE_FAULTS as exc:
        raise field_error(exc) from exc
