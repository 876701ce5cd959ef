"""Legacy ``/v1/completions``: decode (spec 4.3 fields), validation, encode, stream encode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.relay.canonical import (
    Candidate,
    ChatResponse,
    Finish,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    Usage,
    UsageReport,
)
from gateway.runtime.errors import InvalidRequest
from tests.relay.calls import client_call, forwarded
from translators.chat.completions import (
    CompletionsFrontend,
    CompletionStreamEncoder,
    decode_completion_request,
    encode_completion_response,
)

SAMPLES = Path(__file__).parent / "samples"


def body(**fields: Any) -> bytes:
    return orjson.dumps({"model": "m", "prompt": "Say hi", **fields})


def test_decode_every_field() -> None:
    req = decode_completion_request((SAMPLES / "completion_request.json").read_bytes())
    assert req.model == "gpt-3.5-turbo-instruct"
    assert req.messages[0].role == "user" and req.messages[0].parts == [TextPart("Say this is a test")]
    assert req.max_tokens == 7 and req.temperature == 0 and req.top_p == 1 and req.n == 1
    assert req.stop == ["\n"] and not req.stream
    assert req.presence_penalty == 0.1 and req.frequency_penalty == 0.2
    assert req.seed == 7 and req.user == "u-1"
    # echo is applied by the gateway; best_of, logprobs and suffix only act on the fast path.
    assert req.extra == {"echo": True, "best_of": 3, "logprobs": 2, "suffix": "!"}


def test_defaults() -> None:
    req = decode_completion_request(body(prompt=["only one"], stream=True,
                                         stream_options={"include_usage": True}))
    assert req.messages[0].parts == [TextPart("only one")]
    assert req.max_tokens == 16  # OpenAI's default for this endpoint
    assert req.stream and req.stream_usage


@pytest.mark.parametrize(("raw", "param"), [
    (orjson.dumps({"prompt": "x"}), "model"),
    (orjson.dumps({"model": "m"}), "prompt"),
    (body(prompt=["a", "b"]), "prompt"),
    (body(prompt=[1, 2, 3]), "prompt"),
    (body(prompt=[[1, 2], [3]]), "prompt"),
    (body(prompt={"text": "x"}), "prompt"),
    (body(max_tokens=0), "max_tokens"),
    (body(max_tokens=-1), "max_tokens"),
    (body(temperature=2.5), "temperature"),
    (body(n=0), "n"),
    (body(best_of=21), "best_of"),
    (body(logprobs=6), "logprobs"),
    (body(echo="yes"), "echo"),
    (body(stop=[1]), "stop[0]"),
])
def test_validation_names_the_field(raw: bytes, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_completion_request(raw)
    assert info.value.param == param


def test_encode_with_echo() -> None:
    req = decode_completion_request(body(echo=True, n=2))
    response = ChatResponse(id="msg_9", model="m", created=5, candidates=[
        Candidate(index=0, parts=[TextPart(" hello")], stop_reason="end_turn"),
        Candidate(index=1, parts=[TextPart(" hey")], stop_reason="max_tokens")],
        usage=Usage(input_tokens=3, output_tokens=4, reasoning_tokens=1))
    out = orjson.loads(encode_completion_response(response, req))
    assert out == {"id": "cmpl-msg_9", "object": "text_completion", "created": 5, "model": "m",
                   "choices": [
                       {"text": "Say hi hello", "index": 0, "logprobs": None, "finish_reason": "stop"},
                       {"text": "Say hi hey", "index": 1, "logprobs": None, "finish_reason": "length"}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}


def sse(raw: bytes) -> list[Any]:
    return [e[6:].decode() if e[6:] == b"[DONE]" else orjson.loads(e[6:]) for e in raw.split(b"\n\n") if e]


EVENTS: list[StreamEvent] = [
    StreamStart(id="x", model="m", created=9),
    PartStart(index=0, kind="thinking"), ThinkingDelta(index=0, text="hidden"), PartStop(index=0),
    PartStart(index=1, kind="text"), TextDelta(index=1, text="Hello"), TextDelta(index=1, text=" world"),
    PartStop(index=1), Finish(stop_reason="stop_sequence"),
    UsageReport(usage=Usage(input_tokens=2, output_tokens=3)),
]


@pytest.mark.parametrize("usage", [True, False])
def test_stream_encoder(usage: bool) -> None:
    req = decode_completion_request(body(stream=True, echo=True, stream_options={"include_usage": usage}))
    encoder = CompletionStreamEncoder(req)
    chunks = sse(b"".join(encoder.encode(e) for e in EVENTS) + encoder.close())
    assert chunks[-1] == "[DONE]"
    texts = [c["choices"][0]["text"] for c in chunks[:-1] if c["choices"]]
    assert texts == ["Say hi", "Hello", " world", ""]  # echo first; thinking has no legacy form
    assert all(c["object"] == "text_completion" and c["id"] == "cmpl-x" for c in chunks[:-1])
    finishing = [c for c in chunks[:-1] if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finishing] == ["stop"]
    usage_chunks = [c for c in chunks[:-1] if not c["choices"]]
    if usage:
        assert usage_chunks == [{"id": "cmpl-x", "object": "text_completion", "created": 9, "model": "m",
                                 "choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3,
                                                          "total_tokens": 5}}]
    else:
        assert usage_chunks == [] and all("usage" not in c for c in chunks[:-1])


def test_frontend_wiring() -> None:
    frontend = CompletionsFrontend()
    assert frontend.family == "chat"
    call = client_call(frontend, body())
    req = call.canonical()
    assert frontend.stream_encoder(req, call).content_type == "text/event-stream"
    many = body(prompt=["a", "b"])
    with pytest.raises(InvalidRequest):
        client_call(frontend, many).canonical()
    call = forwarded(client_call(frontend, many), "m")
    frontend.fast_request(call)
    assert call.canonical().model == "m"  # only for estimates now
