"""The plugin's pieces on split and hostile input, without a server: NDJSON framing, the upstream
stream decoder, the fast-path watcher, the stream encoder, request decoding and the family."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.relay.canonical import (
    ChatRequest,
    EmbeddingRequest,
    Finish,
    ImagePart,
    Message,
    PartStart,
    PartStop,
    StreamStart,
    TextDelta,
    TextPart,
    ToolArgsDelta,
    ToolChoice,
    ToolResultPart,
    UsageReport,
)
from gateway.runtime.errors import GatewayError, InvalidRequest, ModelNotFound, UpstreamError
from gateway.wire.frames import FrameTooLarge


@pytest.fixture(autouse=True)
def _installed(ollama_plugin: Path) -> None:
    """Every test here imports ``gateway_ollama`` from the installed package."""


def _line(**fields: Any) -> bytes:
    base: dict[str, Any] = {"model": "up", "created_at": "2025-01-01T00:00:00.123456789Z",
                            "message": {"role": "assistant", "content": ""}, "done": False}
    return orjson.dumps({**base, **fields}) + b"\n"


STREAM = b"".join([
    _line(message={"role": "assistant", "content": "", "thinking": "hmm"}),
    _line(message={"role": "assistant", "content": 'say "model":"x"\n'}),
    _line(message={"role": "assistant", "content": "",
                   "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, 2]}}}]}),
    _line(done=True, done_reason="stop", prompt_eval_count=5, eval_count=7),
])


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 3, 17, 10_000])
def test_line_splitter_any_chunking(size: int) -> None:
    from gateway_ollama.ndjson import LineSplitter

    data = b'{"a":1}\r\n\n{"b":2}\n   \n{"c":3}'
    splitter = LineSplitter()
    lines = [line for chunk in _chunks(data, size) for line in splitter.feed(chunk)]
    assert lines == [b'{"a":1}', b'{"b":2}']
    assert splitter.close() == [b'{"c":3}'] and splitter.close() == []


def test_line_splitter_holds_an_unterminated_line_up_to_its_limit() -> None:
    from gateway_ollama.ndjson import LineSplitter

    splitter = LineSplitter(max_line_bytes=100)
    assert splitter.feed(b'{"a":"' + b"x" * 90) == []
    with pytest.raises(FrameTooLarge, match="NDJSON line"):
        splitter.feed(b"x" * 20)
    assert splitter.close() == []  # nothing of the refused line is kept


@pytest.mark.parametrize("size", [1, 5, 64, 10_000])
def test_stream_decoder_any_chunking(size: int) -> None:
    from gateway_ollama.stream_decode import NdjsonDecoder

    decoder = NdjsonDecoder()
    events = [e for chunk in _chunks(STREAM, size) for e in decoder.feed(chunk)] + decoder.close()
    assert decoder.complete
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["StreamStart", "PartStart", "ThinkingDelta", "PartStop", "PartStart", "TextDelta",
                     "PartStop", "PartStart", "ToolArgsDelta", "PartStop", "Finish", "UsageReport"]
    start = events[0]
    assert isinstance(start, StreamStart) and start.model == "up" and start.created == 1735689600
    text = events[5]
    assert isinstance(text, TextDelta) and text.text == 'say "model":"x"\n'
    args = events[8]
    assert isinstance(args, ToolArgsDelta) and orjson.loads(args.partial_json) == {"a": [1, 2]}
    finish, usage = events[10], events[11]
    assert isinstance(finish, Finish) and finish.stop_reason == "tool_use"
    assert isinstance(usage, UsageReport) and (usage.usage.input_tokens, usage.usage.output_tokens) == (5, 7)


def test_stream_decoder_error_line_cut_and_no_usage() -> None:
    from gateway_ollama.stream_decode import NdjsonDecoder

    decoder = NdjsonDecoder()
    decoder.feed(_line(message={"role": "assistant", "content": "hi"}))
    with pytest.raises(UpstreamError, match="model crashed"):
        decoder.feed(b'{"error":"model crashed"}\n')
    cut = NdjsonDecoder()
    cut.feed(STREAM[:-20])
    assert not cut.complete
    bare = NdjsonDecoder()
    events = bare.feed(_line(done=True, done_reason="length"))
    assert bare.complete and not any(isinstance(e, UsageReport) for e in events)
    assert isinstance(events[-1], Finish) and events[-1].stop_reason == "max_tokens"


@pytest.mark.parametrize("size", [1, 7, 10_000])
def test_fast_stream_relays_bytes_and_restores_the_model(size: int) -> None:
    from gateway_ollama.fastpath import NdjsonFastStream

    same = NdjsonFastStream("up")
    out = b"".join(same.feed(c) for c in _chunks(STREAM, size)) + same.close()
    assert out == STREAM and same.complete
    assert same.usage is not None and (same.usage.input_tokens, same.usage.output_tokens) == (5, 7)
    aliased = NdjsonFastStream("public")
    out = b"".join(aliased.feed(c) for c in _chunks(STREAM, size)) + aliased.close()
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert [line["model"] for line in lines] == ["public"] * 4
    assert lines[1]["message"]["content"] == 'say "model":"x"\n'  # text that looks like a key is kept


def test_stream_encoder_collects_tool_arguments() -> None:
    from gateway_ollama.encode import NdjsonEncoder

    encoder = NdjsonEncoder("chat", ChatRequest(model="m", messages=[]))
    events = [StreamStart(id="x", model="pub"), PartStart(index=0, kind="text"),
              TextDelta(index=0, text="Hi"), PartStop(index=0),
              PartStart(index=1, kind="tool_call", tool_call_id="c1", tool_name="f"),
              ToolArgsDelta(index=1, partial_json='{"city":'), ToolArgsDelta(index=1, partial_json='"Oslo"}'),
              PartStop(index=1), PartStart(index=2, kind="tool_call", tool_call_id="c2", tool_name="g"),
              ToolArgsDelta(index=2, partial_json='{"broken'), PartStop(index=2),
              Finish(stop_reason="tool_use"), TextDelta(index=0, text="other candidate", candidate=1)]
    out = b"".join(encoder.encode(e) for e in events) + encoder.close()
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert [line["message"].get("content") for line in lines] == ["Hi", "", "", ""]
    assert lines[1]["message"]["tool_calls"] == [{"function": {"name": "f", "arguments": {"city": "Oslo"}},
                                                  "id": "c1"}]
    assert lines[2]["message"]["tool_calls"][0]["function"]["arguments"] == {}  # a cut fragment
    assert lines[-1]["done"] is True and lines[-1]["done_reason"] == "stop" and lines[-1]["model"] == "pub"
    error = orjson.loads(encoder.error(502, "upstream_error", "boom"))
    assert error == {"error": "boom", "code": "upstream_error"}


def test_decode_chat_pairs_tool_results_with_calls() -> None:
    from gateway_ollama.client import decode_chat

    body = orjson.dumps({"model": "m", "messages": [
        {"role": "user", "content": "both"},
        {"role": "system", "content": "late system"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}},
                                             {"function": {"name": "g", "arguments": {}}}]},
        {"role": "tool", "content": "from g", "tool_name": "g"},
        {"role": "tool", "content": "from f"},
    ]})
    request = decode_chat(body)
    assert [p.text for p in request.system] == ["late system"] and request.stream is True
    results = request.messages[2].parts
    assert [(r.tool_call_id, r.name) for r in results if isinstance(r, ToolResultPart)] == [
        ("call_2_1", "g"), ("call_2_0", "f")]
    with pytest.raises(InvalidRequest) as caught:
        decode_chat(orjson.dumps({"model": "m", "messages": [
            {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]}))
    assert caught.value.param == "messages[0].tool_calls[0].function.arguments"


def test_adapter_refuses_what_ollama_cannot_take() -> None:
    from gateway_ollama.upstream import OllamaAdapter

    adapter = OllamaAdapter()
    by_url = ChatRequest(model="m", messages=[Message(role="user", parts=[ImagePart(url="https://x/y.png")])])
    with pytest.raises(InvalidRequest) as caught:
        adapter.build_request(by_url, "up")
    assert caught.value.param == "messages[0].content[0]"
    parts = [ImagePart(url="data:image/png;base64,iVBORw0KGgo="), TextPart("look")]
    inline = ChatRequest(model="m", tool_choice=ToolChoice(mode="none"),
                         messages=[Message(role="user", parts=parts)])
    sent = orjson.loads(adapter.build_request(inline, "up").body)
    assert sent["messages"] == [{"role": "user", "content": "look", "images": ["iVBORw0KGgo="]}]
    assert sent["stream"] is False and "tools" not in sent
    assert adapter.error_message(b'{"error":"model \\"x\\" not found"}') == 'model "x" not found'
    assert adapter.error_message(b"<html>") == ""


def test_unreadable_upstream_answers_are_upstream_errors() -> None:
    from gateway_ollama.fastpath import read_usage
    from gateway_ollama.upstream import OllamaAdapter

    adapter = OllamaAdapter()
    request = ChatRequest(model="m", messages=[Message(role="user", parts=[TextPart("hi")])])
    for body in (b"<html>502</html>", b'{"message": 3}', b'{"error": "out of memory"}'):
        with pytest.raises(UpstreamError):
            adapter.decode_response(body, request)
        assert read_usage(body) is None
    with pytest.raises(UpstreamError):
        adapter.decode_embedding_response(b'{"embeddings": "no"}', EmbeddingRequest(model="m", inputs=["x"]))


def test_family_envelope_and_paths() -> None:
    from gateway_ollama.family import OllamaFamily

    family = OllamaFamily()
    assert family.owns_path("/api/chat") and family.owns_path("/api/tags")
    assert not family.owns_path("/api/keys") and not family.owns_path("/api/user/self")
    err: GatewayError = InvalidRequest("bad `x`", param="x")
    body = orjson.loads(family.render_error(err))
    assert body == {"error": "bad `x`", "code": "invalid_request", "param": "x"}
    assert orjson.loads(family.render_error(ModelNotFound("nope"))) == {"error": "nope",
                                                                         "code": "model_not_found"}
