"""No input, however malformed, makes the translator raise anything but InvalidRequest (requests) or
anything at all (upstream streams)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson

from gateway.runtime.errors import InvalidRequest
from gateway.settings.config import LimitsConfig
from tests.relay.calls import client_call, forwarded
from translators.messages import request
from translators.messages.client import MessagesFrontend
from translators.messages.stream_decode import MessagesStreamDecoder
from translators.messages.upstream import MessagesAdapter

MINIMAL = b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}'
ODD_VALUES: list[Any] = [None, True, 0, -1, 1.5, 10**30, "", "x", [], {}, [1], {"type": "text"}, "\ud800"]


def mutations(doc: Any, rng: random.Random, n: int) -> list[Any]:
    """``n`` copies of ``doc``, each with one value somewhere replaced by an odd one."""
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, (*path, i))

    walk(doc, ())
    out = []
    for _ in range(n):
        copy = orjson.loads(orjson.dumps(doc))
        path = rng.choice(paths[1:])
        node = copy
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = rng.choice(ODD_VALUES)
        out.append(copy)
    return out


def test_mutated_requests_only_raise_invalid_request(sample: Callable[[str], bytes]) -> None:
    doc = orjson.loads(sample("request_all_blocks.json"))
    adapter = MessagesAdapter()
    for mutated in mutations(doc, random.Random(7), 400):
        try:
            body = orjson.dumps(mutated)
        except TypeError:
            continue  # a lone surrogate cannot be serialised by the test itself
        for decode in (request.peek, request.decode):
            try:
                canonical = decode(body)
            except InvalidRequest:
                continue
            if decode is request.decode:
                adapter.build_request(canonical, "m")  # what is accepted can be translated
                MessagesFrontend().fast_request(forwarded(client_call(MessagesFrontend(), body), "other"))


def test_garbage_streams_never_raise(sample: Callable[[str], bytes]) -> None:
    rng = random.Random(11)
    data = bytearray(sample("stream_full.sse"))
    frontend = MessagesFrontend()
    call = client_call(frontend, MINIMAL)
    for _ in range(200):
        broken = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            broken[rng.randrange(len(broken))] = rng.randrange(256)
        decoder = MessagesStreamDecoder()
        fast = frontend.fast_stream(call, LimitsConfig())
        for i in range(0, len(broken), 37):
            decoder.feed(bytes(broken[i:i + 37]))
            fast.feed(bytes(broken[i:i + 37]))
        decoder.close()
        fast.close()
        _ = fast.usage


def test_garbage_answers_never_raise_unexpectedly(sample: Callable[[str], bytes]) -> None:
    frontend = MessagesFrontend()
    call = forwarded(client_call(frontend, MINIMAL), "m")
    for body in (b"", b"[]", b"{", b'{"usage": 5}', b'{"model": 5}', b'{"content": "x"}', b"\xff"):
        assert frontend.fast_usage(body) is None
        frontend.fast_response(body, call, "m")
        assert isinstance(MessagesAdapter().error_message(body), str)
