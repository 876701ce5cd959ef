"""``gateway.wire.decode``: one field-naming 400 for a bad body, the same on every family."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from gateway.relay.canonical import ChatRequest
from gateway.runtime.errors import InvalidRequest
from gateway.wire.decode import decode, decode_body, field_error
from translators.chat.request import decode_chat_request
from translators.messages import request as messages_request
from translators.v1beta.client import decode_generate_request


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    role: str
    n: int = 0


class Outer(msgspec.Struct):
    messages: list[Inner]
    temperature: float | None = None
    metadata: Any = None


OUTER = msgspec.json.Decoder(Outer)


def refusal(raw: bytes) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        decode(OUTER, raw)
    return info.value


@pytest.mark.parametrize(("raw", "message", "param"), [
    (b'{"messages": [{"role": "user"}, {}]}', "Missing required parameter: `messages[1].role`.",
     "messages[1].role"),
    (b'{}', "Missing required parameter: `messages`.", "messages"),
    (b'{"messages": [{"role": "user", "x": 1}]}', "Unknown parameter: `messages[0].x`.", "messages[0].x"),
    (b'{"messages": [{"role": "user", "n": "3"}]}',
     "Invalid value for `messages[0].n`: expected `int`, got `str`.", "messages[0].n"),
    (b'{"messages": [], "temperature": "hot"}',
     "Invalid value for `temperature`: expected `float | null`, got `str`.", "temperature"),
    (b"[1, 2]", "Invalid request body: expected `object`, got `array`.", None),
])
def test_each_fault_names_its_field(raw: bytes, message: str, param: str | None) -> None:
    err = refusal(raw)
    assert (err.message, err.param) == (message, param)


@pytest.mark.parametrize(("raw", "start"), [
    (b"{not json", "The request body is not valid JSON: JSON is malformed"),
    (b'{"messages": []} trailing', "The request body is not valid JSON: JSON is malformed: trailing"),
    (b'{"messages": [', "The request body is not valid JSON: input data was truncated."),
    (b'{"messages": [{"role": "\xff"}]}', "The request body is not valid UTF-8 JSON."),
    (b'{"messages": [], "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     "The request body is not valid JSON: it is nested too deeply."),
])
def test_broken_bodies(raw: bytes, start: str) -> None:
    err = refusal(raw)
    assert err.message.startswith(start) and err.param is None and err.status == 400


def test_decode_body_and_decode_agree() -> None:
    for raw in (b'{"messages": [{}]}', b"{", b'{"messages": [{"role": "\xfe"}]}', b"7"):
        with pytest.raises(InvalidRequest) as by_type:
            decode_body(raw, Outer)
        assert (by_type.value.message, by_type.value.param) == (refusal(raw).message, refusal(raw).param)


def test_field_error_is_chained_from_the_cause() -> None:
    with pytest.raises(InvalidRequest) as info:
        decode(OUTER, b"{")
    assert isinstance(info.value.__cause__, msgspec.DecodeError)
    assert field_error(RecursionError()).message.endswith("nested too deeply.")


FAMILIES: dict[str, Callable[[bytes], ChatRequest]] = {
    "chat": decode_chat_request,
    "messages": messages_request.decode,
    "v1beta": lambda raw: decode_generate_request(raw, "m", False),
}


@pytest.mark.parametrize("raw", [
    b"{not json",
    b'{"model": "m"',
    b"[" * 50_000 + b"]" * 50_000,
    b'"just a string"',
])
def test_same_fault_same_message_on_every_family(raw: bytes) -> None:
    seen = set()
    for decode_family in FAMILIES.values():
        with pytest.raises(InvalidRequest) as info:
            decode_family(raw)
        seen.add((info.value.message, info.value.param))
    assert len(seen) == 1, seen


def test_bad_utf8_in_a_string_is_the_same_400_on_every_family() -> None:
    bodies = {
        "chat": b'{"model": "m", "messages": [{"role": "user", "content": "hi \xff"}]}',
        "messages": b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi \xff"}]}',
        "v1beta": b'{"contents": [{"role": "user", "parts": [{"text": "hi \xff"}]}]}',
    }
    for family, raw in bodies.items():
        with pytest.raises(InvalidRequest) as info:
            FAMILIES[family](raw)
        assert (info.value.message, info.value.param) == ("The request body is not valid UTF-8 JSON.", None)


def test_a_missing_field_is_named_alike_on_every_family() -> None:
    """Each family's own required field: the message has the one shape."""
    cases = [
        (decode_chat_request, b'{"model": "m", "messages": [{"content": "hi"}]}', "messages[0].role"),
        (messages_request.decode,
         b'{"model": "m", "max_tokens": 5, "messages": [{"content": "hi"}]}', "messages[0].role"),
    ]
    for decode_family, raw, field in cases:
        with pytest.raises(InvalidRequest) as info:
            decode_family(raw)
        assert info.value.param == field
        assert info.value.message == f"Missing required parameter: `{field}`."
