"""The one upstream-attempt path (``gateway.upstream.attempt``) and the per-call ``ClientCall``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from starlette.requests import Request

from gateway.relay.call import ClientCall
from gateway.relay.canonical import ChatRequest
from gateway.relay.translation import RequestView
from gateway.upstream.attempt import UpstreamFailure, upstream_io
from gateway.upstream.client import AnswerTooLarge
from tests.conftest import parse_python
from translators.chat.frontend import CHAT

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(("error", "reason"), [
    (AnswerTooLarge("over 5 bytes"), "failed connecting (AnswerTooLarge: over 5 bytes)"),
    (aiohttp.ClientResponseError(None, (), status=400,  # type: ignore[arg-type]
                                 message="Got more than 8190 bytes\n"),
     "failed connecting (ClientResponseError: Got more than 8190 bytes)"),
    (aiohttp.ClientConnectionError("refused"), "failed connecting (ClientConnectionError)"),
    (aiohttp.ServerDisconnectedError(), "failed connecting (ServerDisconnectedError)"),
    (TimeoutError(), "timed out connecting"),
])
def test_upstream_io_maps_client_errors_once_and_chains_them(error: BaseException,
                                                             reason: str) -> None:
    with pytest.raises(UpstreamFailure) as info, upstream_io("up-1", "connecting"):
        raise error
    assert (info.value.upstream, info.value.reason) == ("up-1", reason)
    assert info.value.__cause__ is error


def test_upstream_io_lets_everything_else_through() -> None:
    with pytest.raises(KeyError), upstream_io("up-1", "reading"):
        raise KeyError("a bug is not an upstream failure")
    with upstream_io("up-1", "reading"):
        pass


def test_client_errors_are_mapped_in_attempt_only() -> None:
    """The relays and the pool name no HTTP client's exception: ``upstream_io`` is the one mapping."""
    for name in ("gateway/relay/pipeline.py", "gateway/relay/stream.py", "gateway/relay/call.py",
                 "gateway/upstream/pool.py"):
        tree = parse_python((ROOT / name).read_text())
        handlers = [ast.unparse(h.type) for h in ast.walk(tree)
                    if isinstance(h, ast.ExceptHandler) and h.type is not None]
        client_errors = ("aiohttp", "TimeoutError", "UpstreamConnectionError", "AnswerTooLarge", "OSError")
        assert not [h for h in handlers if any(word in h for word in client_errors)], (name, handlers)


def test_the_stream_relay_does_not_import_the_plain_relay() -> None:
    code = "import sys, gateway.relay.stream; assert 'gateway.relay.pipeline' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


class CountingFrontend:
    """Just enough of a Frontend to count full decodes."""

    family = "counting"

    def __init__(self) -> None:
        self.decodes = 0

    def decode_request(self, call: ClientCall) -> ChatRequest:
        self.decodes += 1
        return ChatRequest(model=call.view.model, messages=[])


def make_call(frontend: Any, body: bytes = b"{}", query: str = "") -> ClientCall:
    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": query.encode()}
    return ClientCall(frontend, body, RequestView(model="m"), Request(scope))


def test_the_canonical_request_is_decoded_lazily_and_once() -> None:
    frontend = CountingFrontend()
    call = make_call(frontend, query="alt=sse")
    assert call.decoded is None and frontend.decodes == 0
    first = call.canonical()
    assert call.canonical() is first and call.decoded is first and frontend.decodes == 1
    assert call.query.get("alt") == "sse"


def test_frontends_are_stateless_between_calls() -> None:
    """One CHAT object serves an aliased call and a plain one without either seeing the other."""
    aliased = make_call(CHAT, b'{"model": "m", "messages": []}')
    plain = make_call(CHAT, b'{"model": "m", "messages": []}')
    aliased.forwarded, aliased.upstream_model = True, "other-id"
    plain.forwarded, plain.upstream_model = True, "m"
    answer = b'{"model": "other-id", "choices": []}'
    assert CHAT.fast_response(answer, aliased, "m") == b'{"model":"m", "choices": []}'
    assert CHAT.fast_response(answer, plain, "m") is answer
    assert vars(CHAT) == {}
