"""Legacy ``POST /v1/completions`` (spec 4.3): its Frontend, canonical mapping and encoders.

To other protocols a completion is one user message holding the prompt. Only a single prompt
(a string, or an array of one string) can be translated; arrays of several prompts and token-id
prompts are served by OpenAI-compatible upstreams only, which get the client's bytes untouched.
``echo`` is applied by the gateway (the prompt is prepended to each choice's text). ``best_of``,
``logprobs``, ``suffix`` and ``logit_bias`` take effect on the fast path only: a translated
request keeps them in ``extra``, which other protocols ignore. As at OpenAI, ``max_tokens``
defaults to 16.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from gateway.api import ClientCall, InvalidRequest
from gateway.api.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    Message,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    UsageReport,
)
from gateway.api.wire import decode
from translators.chat.fastpath import ChatView, OpenAIFastPath
from translators.chat.mapping import finish_reason, now, usage_to_wire, wire_id
from translators.chat.response import DONE, SSE_CONTENT_TYPE, sse_error, sse_event
from translators.chat.validation import require, stop_list, unknown_fields
from translators.chat.wire import CompletionRequest, completion_request_decoder, top_level_decoder
from translators.chat.wire_out import OutTextChoice, OutTextCompletion, OutUsage, encoder

KNOWN_FIELDS = frozenset(f.name for f in msgspec.structs.fields(CompletionRequest)) - {"echo", "best_of",
                                                                                      "logprobs"}
DEFAULT_MAX_TOKENS = 16


def decode_completion_request(body: bytes, wire: CompletionRequest | None = None) -> ChatRequest:
    """``wire``: the body already decoded (by the fast path's ``peek``), not decoded again."""
    top = decode(top_level_decoder, body)
    if wire is None:
        wire = decode(completion_request_decoder, body)
    require(bool(wire.model), "You must provide a model parameter: `model` is empty.", "model")
    prompt = _single_prompt(wire.prompt)
    max_tokens = DEFAULT_MAX_TOKENS if wire.max_tokens is None else wire.max_tokens
    require(max_tokens >= 1, "`max_tokens` must be at least 1 for this model.", "max_tokens")
    stream = bool(wire.stream)
    return ChatRequest(
        model=wire.model,
        messages=[Message(role="user", parts=[TextPart(prompt)])],
        max_tokens=max_tokens,
        temperature=wire.temperature,
        top_p=wire.top_p,
        stop=stop_list(wire.stop),
        stream=stream,
        stream_usage=stream and wire.stream_options is not None and bool(wire.stream_options.include_usage),
        n=wire.n or 1,
        seed=wire.seed,
        presence_penalty=wire.presence_penalty,
        frequency_penalty=wire.frequency_penalty,
        user=wire.user,
        extra=unknown_fields(top, KNOWN_FIELDS),
    )


def _single_prompt(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if prompt is None:
        raise InvalidRequest("Missing required parameter: `prompt`.", param="prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt[0]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        raise InvalidRequest("`prompt`: this model is served by a non-OpenAI protocol, which takes a single "
                             "prompt per request; send the prompts one by one.", param="prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(p, int | list) for p in prompt):
        raise InvalidRequest("`prompt`: token-id prompts can only be sent to an OpenAI-compatible upstream, "
                             "and this model is served by another protocol.", param="prompt")
    raise InvalidRequest("Invalid value for `prompt`: expected a string or an array of strings.",
                         param="prompt")


def prompt_of(request: ChatRequest) -> str:
    parts = request.messages[0].parts if request.messages else []
    return "".join(p.text for p in parts if isinstance(p, TextPart))


def _echo(request: ChatRequest) -> str:
    return prompt_of(request) if request.extra.get("echo") is True else ""


def encode_completion_response(response: ChatResponse, request: ChatRequest) -> bytes:
    echo = _echo(request)
    choices = [OutTextChoice(echo + "".join(p.text for p in c.parts if isinstance(p, TextPart)), c.index,
                             None, finish_reason(c.stop_reason))
               for c in sorted(response.candidates, key=lambda c: c.index)]
    out = OutTextCompletion(id=wire_id("cmpl-", response.id), created=response.created or now(),
                            model=response.model or request.model, choices=choices,
                            usage=usage_to_wire(response.usage, details=False))
    return encoder.encode(out)


class CompletionStreamEncoder:
    """Canonical events -> ``text_completion`` SSE chunks, then ``data: [DONE]``. Thinking and tool
    calls have no legacy form and are left out."""

    content_type = SSE_CONTENT_TYPE

    def __init__(self, request: ChatRequest) -> None:
        self._request = request
        self._id = wire_id("cmpl-", None)
        self._created = now()
        self._model = request.model
        self._usage_field: UnsetType | None = None if request.stream_usage else UNSET
        self._usage_sent = False
        self._failed = False

    def encode(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):
            return self._chunk(event.candidate, event.text, None) if event.text else b""
        if isinstance(event, Finish):
            return self._chunk(event.candidate, "", finish_reason(event.stop_reason))
        if isinstance(event, StreamStart):
            self._id = wire_id("cmpl-", event.id)
            self._created = event.created or self._created
            self._model = event.model or self._model
            echo = _echo(self._request)
            return b"".join(self._chunk(c, echo, None) for c in range(self._request.n)) if echo else b""
        if isinstance(event, UsageReport) and self._request.stream_usage and not self._usage_sent:
            self._usage_sent = True
            return self._emit([], usage_to_wire(event.usage, details=False))
        return b""

    def close(self) -> bytes:
        return b"" if self._failed else DONE

    def error(self, status: int, code: str, message: str) -> bytes:
        self._failed = True
        return sse_error(status, code, message)

    def _chunk(self, candidate: int, text: str, finish: str | None) -> bytes:
        return self._emit([OutTextChoice(text, candidate, None, finish)], self._usage_field)

    def _emit(self, choices: list[OutTextChoice], usage: OutUsage | UnsetType | None) -> bytes:
        chunk = OutTextCompletion(id=self._id, created=self._created, model=self._model, choices=choices,
                                  usage=usage)
        return sse_event(encoder.encode(chunk))


class CompletionsFrontend(OpenAIFastPath):
    """Stateless: ``COMPLETIONS`` serves every request."""

    family = "chat"
    upstream_path = "/v1/completions"

    def decode_request(self, call: ClientCall) -> ChatRequest:
        view = call.view
        try:
            wire = view.completion if isinstance(view, ChatView) else None
            return decode_completion_request(call.body, wire)
        except InvalidRequest as err:
            return self.lenient(call, err)

    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes:
        return encode_completion_response(response, request)

    def stream_encoder(self, request: ChatRequest, call: ClientCall) -> CompletionStreamEncoder:
        return CompletionStreamEncoder(request)


COMPLETIONS = CompletionsFrontend()
