"""The same-format fast path for chat and legacy completions: client bytes up, upstream bytes down.

The request is validated by ``peek`` on every path (decoded once into its wire Struct, which the
translated path reuses: ``ChatView``), so a body the family refuses never reaches an upstream;
from the answer only the ``usage`` is read, with a small view Struct. The client's body is
forwarded untouched unless the model is aliased (the upstream knows it by another id) or the
client streams without ``stream_options.include_usage`` (the gateway asks for usage anyway, to
bill it, and drops the usage-only chunk the client did not ask for); either costs one
``orjson`` round trip of the body. Unknown vendor fields therefore always reach the upstream.

Frontends are stateless: whether the model was aliased (so that ``fast_stream`` and
``fast_response`` restore the public id) is read from the per-call ``ClientCall``.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import orjson

from gateway.api import (
    ClientCall,
    Frontend,
    InvalidRequest,
    LimitsConfig,
    RequestView,
    UpstreamCall,
    field_error,
)
from gateway.api.canonical import ChatRequest, Message, TextPart, Usage
from gateway.api.relay import body_token_bound
from gateway.api.wire import MAX_FRAME_BYTES, EventBlocks, decode, event_data, split_events
from translators.chat.mapping import usage_from_wire
from translators.chat.validation import require
from translators.chat.wire import (
    ChatCompletionRequest,
    CompletionRequest,
    StreamOptions,
    chat_request_decoder,
    completion_request_decoder,
    usage_only_decoder,
)

_MODEL_VALUE = re.compile(rb'"model"\s*:\s*"(?:[^"\\]|\\.)*"')


class ChatView(RequestView):
    """The view of a chat or legacy completions request: what metering and routing need, plus the
    validated wire request itself, decoded once by ``peek`` and reused by the translated path."""

    chat: ChatCompletionRequest | None = None
    completion: CompletionRequest | None = None


def _view(body: bytes, model: str, stream: bool | None, max_tokens: int | None, copies: int,
          options: StreamOptions | None) -> dict[str, Any]:
    streaming = bool(stream)
    return {"model": model, "stream": streaming, "max_tokens": max_tokens,
            "input_tokens_estimate": body_token_bound(body), "candidates": copies,
            "stream_usage": streaming and options is not None and bool(options.include_usage)}


def peek_chat(body: bytes) -> ChatView:
    """A chat completions request, validated as the family defines it (every field typed, the
    required ones present), whichever path it takes; the prompt is not translated."""
    wire = decode(chat_request_decoder, body)
    require(bool(wire.model), "You must provide a model parameter: `model` is empty.", "model")
    require(bool(wire.messages), "`messages` must be a non-empty array.", "messages")
    max_tokens = wire.max_completion_tokens if wire.max_completion_tokens is not None else wire.max_tokens
    return ChatView(**_view(body, wire.model, wire.stream, max_tokens, wire.n or 1, wire.stream_options),
                    chat=wire)


def peek_completion(body: bytes) -> ChatView:
    """A legacy completions request, validated (``prompt``: a string, strings, token ids, or
    arrays of token ids)."""
    wire = decode(completion_request_decoder, body)
    require(bool(wire.model), "You must provide a model parameter: `model` is empty.", "model")
    check_prompt(wire.prompt)
    copies = max(wire.n or 1, wire.best_of or 1)  # best_of: every generated candidate is billed
    return ChatView(**_view(body, wire.model, wire.stream, wire.max_tokens, copies, wire.stream_options),
                    completion=wire)


def check_prompt(prompt: Any) -> None:
    if prompt is None or isinstance(prompt, str):
        return
    if isinstance(prompt, list) and (all(isinstance(p, str) for p in prompt)
                                     or all(_token_id(p) for p in prompt)
                                     or all(isinstance(p, list) and all(_token_id(t) for t in p)
                                            for p in prompt)):
        return
    raise InvalidRequest("Invalid value for `prompt`: expected a string, an array of strings, an array "
                         "of token ids or an array of token id arrays.", param="prompt")


def _token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def forward_body(body: bytes, view: RequestView, upstream_model: str) -> bytes:
    aliased = upstream_model != view.model
    ask_usage = view.stream and not view.stream_usage
    if not aliased and not ask_usage:
        return body
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:  # msgspec accepted it; orjson is stricter on huge ints
        raise field_error(exc) from exc
    if aliased:
        obj["model"] = upstream_model
    if ask_usage:
        options = obj.get("stream_options")
        obj["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return orjson.dumps(obj)


def replace_model(data: bytes, model: str, count: int = 0) -> bytes:
    """Every top-level ``"model": "..."`` of ``data`` set to ``model``. A quote inside a JSON string
    is always escaped, so the pattern only ever matches a real key."""
    if b'"model"' not in data:
        return data
    replacement = b'"model":' + orjson.dumps(model)
    return _MODEL_VALUE.sub(lambda _: replacement, data, count=count)


_USAGE_TAIL = 4096  # where ``usage`` is looked for first: OpenAI writes it last


def read_usage(body: bytes) -> Usage | None:
    view = _usage_at_the_end(body)
    if view is None:
        try:
            view = usage_only_decoder.decode(body)
        except msgspec.MsgspecError:
            return None
    return usage_from_wire(view.usage) if view.usage is not None else None


def _usage_at_the_end(body: bytes) -> Any:
    """The answer's ``usage`` read from its tail when it is the top-level object's last member, as
    OpenAI writes it: a large answer (2,048 embedding vectors are tens of megabytes) is then not
    scanned whole. ``"usage"`` with both quotes bare is never inside a JSON string, and a nested
    one leaves an unbalanced ``}``: anything else is None, and the whole body is decoded."""
    if len(body) <= _USAGE_TAIL:
        return None
    at = body.rfind(b'"usage"', len(body) - _USAGE_TAIL)
    if at < 0:
        return None
    try:
        return usage_only_decoder.decode(b"{" + body[at:])
    except msgspec.MsgspecError:
        return None


def rough_request(body: bytes, model: str) -> ChatRequest:
    """A stand-in for a request that a same-format upstream accepted but the strict decoder would
    refuse (untranslatable parts): good enough to estimate its tokens, which is all it is for."""
    text = body.decode("utf-8", "replace")
    return ChatRequest(model=model, messages=[Message(role="user", parts=[TextPart(text)])])


def _aliased(call: ClientCall) -> bool:
    return call.upstream_model is not None and call.upstream_model != call.public_model


class OpenAIFastPath(Frontend):
    """Frontend methods of the fast path, shared by chat and legacy completions (stateless)."""

    upstream_path = "/v1/chat/completions"

    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
        return peek_chat(body) if self.upstream_path == "/v1/chat/completions" else peek_completion(body)

    def lenient(self, call: ClientCall, error: InvalidRequest) -> ChatRequest:
        """After a same-format upstream accepted the bytes, the canonical form is only wanted for
        an offline estimate, so an untranslatable part must not fail the call."""
        if not call.forwarded:
            raise error
        return rough_request(call.body, call.view.model)

    def fast_request(self, call: ClientCall) -> UpstreamCall:
        upstream_model = call.upstream_model or call.view.model
        return UpstreamCall(path=self.upstream_path, body=forward_body(call.body, call.view, upstream_model))

    def fast_usage(self, body: bytes) -> Usage | None:
        return read_usage(body)

    def fast_stream(self, call: ClientCall, limits: LimitsConfig) -> FastStream:
        return FastStream(strip_usage=not call.view.stream_usage,
                          public_model=call.public_model if _aliased(call) else None,
                          max_event_bytes=limits.sse_event_bytes)

    def fast_response(self, body: bytes, call: ClientCall, public_model: str) -> bytes:
        return replace_model(body, public_model, count=1) if _aliased(call) else body


class _AnyObject(msgspec.Struct):
    """Validates that a chunk is one JSON object, reading none of it."""


_CHUNK_SYNTAX = msgspec.json.Decoder(_AnyObject)


class FastStream:
    """Relays an OpenAI-style SSE stream: complete events go out as soon as they are in, an event
    split across chunks waits for its end (at most ``max_event_bytes`` of it: the running config's
    ``limits.sse_event_bytes``; a bigger or unframed answer is an upstream fault, which the relay
    ends with an error event, not something to buffer); the usage is read on the way; the
    usage-only chunk is dropped when the client did not ask for it; the model id is restored when
    aliased."""

    def __init__(self, *, strip_usage: bool, public_model: str | None = None,
                 max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._strip_usage = strip_usage
        self._public_model = public_model
        self._events = EventBlocks(max_event_bytes)
        self._usage: Usage | None = None
        self._complete = False

    @property
    def usage(self) -> Usage | None:
        return self._usage

    @property
    def complete(self) -> bool:
        return self._complete

    def feed(self, chunk: bytes) -> bytes:
        data = self._events.feed(chunk)
        return self._relay(data) if data else b""

    def close(self) -> bytes:
        tail = self._events.close()
        try:
            return self._relay(tail) if tail else b""
        except msgspec.DecodeError:
            return b""  # the half of an event a cut stream left: dropped, the relay reports the cut

    def _relay(self, data: bytes) -> bytes:
        """Each event read once: a payload naming ``usage`` is decoded for it (which also proves
        it one JSON object), any other checked to be one (a broken chunk raises, and the relay
        ends the stream with an in-band error, an upstream cut, instead of passing garbage)."""
        kept: list[bytes] = []
        dropped = False
        for event in split_events(data):
            payload = event_data(event)
            if payload is not None:
                if payload == b"[DONE]":
                    self._complete = True
                elif payload.strip() == b"[DONE]":
                    pass
                elif b'"usage"' in payload:
                    if self._saw_usage_only(payload):
                        dropped = True
                        continue
                else:
                    _CHUNK_SYNTAX.decode(payload)
            kept.append(event)
        if dropped:
            data = b"".join(kept)
        if self._public_model is not None:
            data = replace_model(data, self._public_model)
        return data

    def _saw_usage_only(self, payload: bytes) -> bool:
        """Records the chunk's usage; True when it is a usage-only chunk to drop."""
        try:
            view = usage_only_decoder.decode(payload)
        except msgspec.MsgspecError:
            _CHUNK_SYNTAX.decode(payload)  # no usage to read; still one JSON object, or it raises
            return False
        if view.usage is None:
            return False
        self._usage = usage_from_wire(view.usage)
        return self._strip_usage and not view.choices
