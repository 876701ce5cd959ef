"""The same-format fast path: bytes through, usage read on the way, the prompt never decoded."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.relay.canonical import Usage
from gateway.relay.translation import RequestView
from gateway.runtime.errors import InvalidRequest
from gateway.settings.config import LimitsConfig
from tests.relay.calls import client_call, forwarded
from translators.chat import request as request_module
from translators.chat.completions import CompletionsFrontend
from translators.chat.fastpath import FastStream, replace_model
from translators.chat.frontend import ChatFrontend

SAMPLES = Path(__file__).parent / "samples"


def body(**fields: Any) -> bytes:
    base: dict[str, Any] = {"model": "public", "messages": [{"role": "user", "content": "hi"}]}
    base.update(fields)
    return orjson.dumps(base)


def test_peek_reads_only_what_metering_needs() -> None:
    view = ChatFrontend().peek(body(stream=True, stream_options={"include_usage": True}, max_tokens=10,
                                    max_completion_tokens=20), None, False)
    assert view.model == "public" and view.stream and view.stream_usage
    assert view.max_tokens == 20
    assert view.input_tokens_estimate > 0
    several = ChatFrontend().peek(body(n=3, max_tokens=10), None, False)
    assert (several.max_tokens, several.candidates) == (10, 3)  # every choice may use max_tokens
    plain = ChatFrontend().peek(body(), None, False)
    assert not plain.stream and not plain.stream_usage and plain.max_tokens is None


@pytest.mark.parametrize(("raw", "param"), [
    (b'{"messages": []}', "model"),
    (body(model=""), "model"),
    (body(stream="yes"), "stream"),
    (body(max_tokens="many"), "max_tokens"),
    (body(stream_options={"include_usage": "yes"}), "stream_options.include_usage"),
])
def test_peek_errors_name_the_field(raw: bytes, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        ChatFrontend().peek(raw, None, False)
    assert info.value.param == param


def test_non_stream_request_forwards_the_very_bytes_without_translating_messages(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A valid body (peek validated it) with a part the translator would refuse (input audio) and
    # a vendor field: the fast path forwards it without translating anything.
    raw = body(messages=[{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}],
        x_vendor={"keep": [1, 2]})

    def refuse(*_: object) -> None:
        raise AssertionError("the fast path decoded the messages")

    monkeypatch.setattr(request_module, "decode_chat_request", refuse)
    monkeypatch.setattr(orjson, "loads", refuse)
    frontend = ChatFrontend()
    client = forwarded(client_call(frontend, raw), "public")
    call = frontend.fast_request(client)
    assert call.path == "/v1/chat/completions"
    assert call.body is raw  # untouched: unknown vendor fields reach the upstream as sent
    answer = (SAMPLES / "chat_response_tools.json").read_bytes()
    assert frontend.fast_response(answer, client, "public") is answer
    assert frontend.fast_usage(answer) == Usage(input_tokens=82, output_tokens=17, cache_read_tokens=64)


def test_aliased_model_is_rewritten_both_ways() -> None:
    raw = body(x_vendor=1)
    frontend = ChatFrontend()
    client = forwarded(client_call(frontend, raw), "upstream-id")
    call = frontend.fast_request(client)
    sent = orjson.loads(call.body)
    assert sent["model"] == "upstream-id" and sent["x_vendor"] == 1 and "stream_options" not in sent
    answer = (SAMPLES / "chat_response_tools.json").read_bytes()
    back = orjson.loads(frontend.fast_response(answer, client, "public"))
    assert back["model"] == "public"
    assert back["choices"] == orjson.loads(answer)["choices"]


def test_stream_without_usage_asks_the_upstream_for_it() -> None:
    raw = body(stream=True, stream_options={"include_obfuscation": False})
    frontend = ChatFrontend()
    sent = orjson.loads(frontend.fast_request(forwarded(client_call(frontend, raw), "public")).body)
    assert sent["stream_options"] == {"include_obfuscation": False, "include_usage": True}
    with_usage = body(stream=True, stream_options={"include_usage": True})
    assert frontend.fast_request(forwarded(client_call(frontend, with_usage), "public")).body is with_usage


def test_legacy_completions_use_their_own_path() -> None:
    raw = orjson.dumps({"model": "public", "prompt": ["a", "b"], "best_of": 2, "max_tokens": 5})
    frontend = CompletionsFrontend()
    view = frontend.peek(raw, None, False)
    assert view.max_tokens == 5 and view.candidates == 2  # best_of candidates are generated and billed
    call = frontend.fast_request(forwarded(client_call(frontend, raw), "public"))
    assert call.path == "/v1/completions" and call.body is raw


def relay(stream: FastStream, chunks: list[bytes]) -> bytes:
    return b"".join(stream.feed(c) for c in chunks) + stream.close()


STREAM = (SAMPLES / "chat_stream_text_usage.sse").read_bytes()
USAGE = Usage(input_tokens=9, output_tokens=12, cache_read_tokens=4)


def events(raw: bytes) -> list[bytes]:
    return [e for e in raw.split(b"\n\n") if e]


def test_stream_passes_whole_events_through_untouched() -> None:
    stream = FastStream(strip_usage=False)
    lines = [e + b"\n\n" for e in events(STREAM)]
    for line in lines:
        assert stream.feed(line) is line  # no copy, no delay
    assert stream.close() == b""
    assert stream.usage == USAGE and stream.complete


def test_usage_chunk_dropped_when_not_asked_for() -> None:
    stream = FastStream(strip_usage=True)
    out = relay(stream, [STREAM])
    assert stream.usage == USAGE and stream.complete
    assert events(out) == [e for e in events(STREAM) if b'"choices":[]' not in e]
    assert out.endswith(b"data: [DONE]\n\n")


@pytest.mark.parametrize("strip", [True, False])
def test_any_chunking_relays_the_same_bytes(strip: bool) -> None:
    expected = relay(FastStream(strip_usage=strip), [STREAM])
    rng = random.Random(7)
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(STREAM)), 12))
        chunks = [STREAM[a:b] for a, b in zip([0, *cuts], [*cuts, len(STREAM)], strict=True)]
        stream = FastStream(strip_usage=strip)
        assert relay(stream, chunks) == expected
        assert stream.usage == USAGE and stream.complete


def test_complete_events_go_out_at_once_and_split_ones_wait() -> None:
    first, second = events(STREAM)[:2]
    stream = FastStream(strip_usage=True)
    half = len(second) // 2
    assert stream.feed(first + b"\n\n" + second[:half]) == first + b"\n\n"
    assert stream.feed(second[half:] + b"\n\n") == second + b"\n\n"


def test_done_inside_content_does_not_complete() -> None:
    text_event = events(STREAM)[2]
    assert b"data: [DONE]" in text_event
    stream = FastStream(strip_usage=True)
    stream.feed(text_event + b"\n\n")
    assert not stream.complete


def test_cut_stream_is_incomplete_and_keeps_usage_unknown() -> None:
    stream = FastStream(strip_usage=True)
    relay(stream, [STREAM[: STREAM.index(b'"choices":[]')]])
    assert not stream.complete and stream.usage is None


def test_aliased_stream_restores_the_public_model() -> None:
    stream = FastStream(strip_usage=False, public_model="public")
    out = relay(stream, [STREAM])
    for event in events(out)[:-1]:
        assert orjson.loads(event[6:])["model"] == "public"
    # Model text inside content is not touched.
    assert b'there \\"model\\":\\"x\\"' in out


def test_fast_stream_from_frontend_knows_about_aliasing() -> None:
    frontend = ChatFrontend()
    raw = body(stream=True)
    call = forwarded(client_call(frontend, raw), "upstream-id")
    frontend.fast_request(call)
    out = relay(frontend.fast_stream(call, LimitsConfig()), [STREAM])
    assert b'"model":"public"' in out and b"gpt-4o-mini" not in out
    assert b'"choices":[]' not in out  # the client did not ask for usage


def test_replace_model_handles_spacing_and_escapes() -> None:
    assert replace_model(b'{"model" : "a\\"b", "x": 1}', "new") == b'{"model":"new", "x": 1}'
    assert replace_model(b'{"x": 1}', "new") == b'{"x": 1}'


def test_usage_view_ignores_garbage() -> None:
    frontend = ChatFrontend()
    assert frontend.fast_usage(b"not json") is None
    assert frontend.fast_usage(b'{"choices": []}') is None


def test_request_view_type() -> None:
    assert isinstance(ChatFrontend().peek(body(), None, False), RequestView)
