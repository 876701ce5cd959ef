"""Same-format fast path: bytes forwarded unchanged, usage read from answers and split streams."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from gateway.relay.canonical import Usage
from gateway.settings.config import LimitsConfig
from tests.relay.calls import client_call, forwarded
from translators.messages.client import MessagesFrontend

BODY = (b'{"model":"public",  "max_tokens":64,"messages":[{"role":"user","content":"hi \\u00e9"}],'
        b'"stream":true,"service_tier":"auto"}')


def test_fast_request_forwards_bytes_unchanged() -> None:
    frontend = MessagesFrontend()
    call = frontend.fast_request(forwarded(client_call(frontend, BODY), "public"))
    assert call.path == "/v1/messages" and call.body is BODY and call.headers == {}


def test_fast_request_rewrites_only_an_aliased_model_and_passes_beta() -> None:
    frontend = MessagesFrontend()
    client = client_call(frontend, BODY, headers=[("anthropic-beta", "prompt-caching-2024-07-31"),
                                                  ("vendorb-beta", "extended-cache-ttl-2025-04-11")])
    call = frontend.fast_request(forwarded(client, "claude-upstream"))
    assert orjson.loads(call.body) == {**orjson.loads(BODY), "model": "claude-upstream"}
    assert b'"content":"hi \\u00e9"' in call.body  # other values keep their exact bytes
    assert call.headers == {"anthropic-beta": "prompt-caching-2024-07-31,extended-cache-ttl-2025-04-11"}


def test_fast_usage_and_response(sample: Callable[[str], bytes]) -> None:
    frontend = MessagesFrontend()
    body = sample("response_thinking_tool.json")
    assert frontend.fast_usage(body) == Usage(input_tokens=1550, output_tokens=89, cache_write_tokens=1200,
                                              cache_read_tokens=300)
    assert frontend.fast_usage(b"oops") is None
    call = forwarded(client_call(frontend, BODY), "public")
    restored = frontend.fast_response(body, call, "public")
    assert orjson.loads(restored) == {**orjson.loads(body), "model": "public"}
    same = body.replace(b'"claude-sonnet-4-5-20250929"', b'"public"')
    assert frontend.fast_response(same, call, "public") is same
    assert frontend.fast_response(b"not json", call, "public") == b"not json"


@pytest.mark.parametrize("size", [1, 3, 10, 77, 500, 1 << 20])
def test_fast_stream_passes_bytes_and_reads_usage(sample: Callable[[str], bytes], size: int) -> None:
    data = sample("stream_full.sse").replace(b'"claude-sonnet-4-5-20250929"', b'"public"')
    frontend = MessagesFrontend()
    stream = frontend.fast_stream(client_call(frontend, BODY), LimitsConfig())
    out = b"".join(stream.feed(data[i:i + size]) for i in range(0, len(data), size)) + stream.close()
    assert out == data
    assert stream.complete
    assert stream.usage == Usage(input_tokens=135, output_tokens=89, cache_write_tokens=100,
                                 cache_read_tokens=10)


@pytest.mark.parametrize("size", [1, 4, 33, 1 << 20])
def test_fast_stream_restores_the_public_model(sample: Callable[[str], bytes], size: int) -> None:
    data = sample("stream_full.sse")
    frontend = MessagesFrontend()
    stream = frontend.fast_stream(client_call(frontend, BODY), LimitsConfig())
    out = b"".join(stream.feed(data[i:i + size]) for i in range(0, len(data), size)) + stream.close()
    first_data = next(line for line in out.split(b"\n") if line.startswith(b"data:"))
    assert orjson.loads(first_data[5:])["message"]["model"] == "public"
    # Everything after message_start is untouched.
    assert out[out.index(b"event: ping"):] == data[data.index(b"event: ping"):]
    assert stream.complete and stream.usage is not None and stream.usage.output_tokens == 89


def test_fast_stream_incomplete_and_error(sample: Callable[[str], bytes]) -> None:
    data = sample("stream_error.sse").replace(b'"claude-sonnet-4-5"', b'"public"')
    frontend = MessagesFrontend()
    stream = frontend.fast_stream(client_call(frontend, BODY), LimitsConfig())
    out = b"".join(stream.feed(data[i:i + 7]) for i in range(0, len(data), 7)) + stream.close()
    assert out == data
    assert not stream.complete
    assert stream.usage == Usage(input_tokens=12, output_tokens=1)


def test_fast_stream_without_usage() -> None:
    frontend = MessagesFrontend()
    stream = frontend.fast_stream(client_call(frontend, BODY), LimitsConfig())
    data = b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"x"}}\n\n'
    assert stream.feed(data[:20]) + stream.feed(data[20:]) + stream.close() == data
    assert stream.usage is None and not stream.complete
