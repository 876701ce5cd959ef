"""What validating every request costs the fast path: ``peek`` with and without validation.

    .venv/bin/python -m bench.validation_cost [--seconds 0.5]

"Without" is the fast path's view before validation (the families' ``RequestPeek`` views: a few
top-level fields, the prompt skipped) plus the input bound; "with" is each family's ``peek`` as the
relay calls it now: the whole body decoded once into the family's wire Struct (msgspec), its
checks run, the same bound. Bodies are realistic: a short chat turn, a 12-turn conversation with
tools and a system prompt, and a 60 kB conversation; one per family.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import msgspec
import orjson

from gateway.relay.tokens import body_token_bound
from translators.chat import wire as chat_wire
from translators.chat.frontend import CHAT
from translators.messages import wire as messages_wire
from translators.messages.client import MESSAGES
from translators.v1beta import wire as v1beta_wire
from translators.v1beta.frontend import V1BETA

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {
    "type": "string", "enum": ["c", "f"]}}, "required": ["city"]}
TURN = ("Could you explain how a write-ahead log keeps a database consistent after a crash, "
        "with an example of the recovery steps? ")


def _chat(turns: int, words: int) -> bytes:
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are a careful assistant."}]
    for i in range(turns):
        messages.append({"role": "user", "content": TURN * words})
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}}
        messages.append({"role": "assistant", "content": TURN * words,
                         **({"tool_calls": [call]} if i % 3 == 1 else {})})
        if i % 3 == 1:
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": '{"temp": 4}'})
    messages.append({"role": "user", "content": TURN})
    return orjson.dumps({"model": "gpt-4o", "messages": messages, "temperature": 0.7, "max_tokens": 512,
                         "stream": True, "stream_options": {"include_usage": True},
                         "tools": [{"type": "function", "function": {
                             "name": "weather", "description": "Weather", "parameters": WEATHER_SCHEMA}}]})


def _messages(turns: int, words: int) -> bytes:
    messages: list[dict[str, object]] = []
    for _ in range(turns):
        messages.append({"role": "user", "content": [{"type": "text", "text": TURN * words}]})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": TURN * words}]})
    messages.append({"role": "user", "content": TURN})
    return orjson.dumps({"model": "claude", "max_tokens": 512, "system": "You are a careful assistant.",
                         "messages": messages, "temperature": 0.7,
                         "tools": [{"name": "weather", "description": "Weather",
                                    "input_schema": WEATHER_SCHEMA}]})


def _gemini(turns: int, words: int) -> bytes:
    contents: list[dict[str, object]] = []
    for _ in range(turns):
        contents.append({"role": "user", "parts": [{"text": TURN * words}]})
        contents.append({"role": "model", "parts": [{"text": TURN * words}]})
    contents.append({"role": "user", "parts": [{"text": TURN}]})
    return orjson.dumps({"contents": contents, "systemInstruction": {"parts": [{"text": "Be careful."}]},
                         "generationConfig": {"maxOutputTokens": 512, "temperature": 0.7},
                         "tools": [{"functionDeclarations": [{"name": "weather", "description": "Weather",
                                                              "parameters": WEATHER_SCHEMA}]}]})


SIZES = {"short": (0, 1), "12 turns": (6, 2), "60 kB": (24, 10)}
# The baseline views, built once like the relay's decoders.
_CHAT_PEEK = chat_wire.peek_decoder
_MSG_PEEK = msgspec.json.Decoder(messages_wire.RequestPeek)
_GEM_PEEK = msgspec.json.Decoder(v1beta_wire.RequestPeek)
Peek = Callable[[bytes], object]


def _chat_without(body: bytes) -> object:
    return _CHAT_PEEK.decode(body), body_token_bound(body)


def _messages_without(body: bytes) -> object:
    return _MSG_PEEK.decode(body), body_token_bound(body)


def _gemini_without(body: bytes) -> object:
    return _GEM_PEEK.decode(body), body_token_bound(body)


FAMILIES: dict[str, tuple[Callable[[int, int], bytes], Peek, Peek]] = {
    "chat": (_chat, _chat_without, lambda b: CHAT.peek(b, None, False)),
    "messages": (_messages, _messages_without, lambda b: MESSAGES.peek(b, None, False)),
    "v1beta": (_gemini, _gemini_without, lambda b: V1BETA.peek(b, "models/gemini", False)),
}


def _rate(fn: Peek, body: bytes, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(20):
            fn(body)
        n += 20
    return (time.perf_counter() - start) / n * 1e6


def _time(without: Peek, with_: Peek, body: bytes, seconds: float) -> tuple[float, float]:
    """Microseconds per call of each: rounds alternate between the two (so both see the same load
    of a shared machine) and the best round of each counts (the least disturbed)."""
    a, b = [], []
    for _ in range(20):
        a.append(_rate(without, body, seconds / 40))
        b.append(_rate(with_, body, seconds / 40))
    return min(a), min(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    args = parser.parse_args()
    print(f"{'family':9} {'body':9} {'bytes':>7} {'without µs':>11} {'with µs':>9} {'cost µs':>8}")
    for family, (make, without, with_) in FAMILIES.items():
        for size, (turns, words) in SIZES.items():
            body = make(turns, words)
            with_(body)  # the body is valid: a refusal here would make the figures meaningless
            old, new = _time(without, with_, body, args.seconds)
            print(f"{family:9} {size:9} {len(body):7d} {old:11.2f} {new:9.2f} {new - old:8.2f}")


if __name__ == "__main__":
    main()
