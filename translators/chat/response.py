"""Canonical answers -> the client's ``chat.completion`` object and ``chat.completion.chunk`` stream.

Thinking is written as ``reasoning_content`` (the de-facto field of DeepSeek, vLLM and new-api);
signatures and redacted thinking, which have no OpenAI form, as ``reasoning_details`` entries
(``translators.chat.reasoning``; streamed when their part ends). Tool calls are streamed in
OpenAI's incremental format: ``index`` counts tool calls within the choice, the first delta of a
call carries ``id``, ``type`` and ``function.name``, later ones argument fragments.
"""

from __future__ import annotations

import orjson
from msgspec import UNSET, UnsetType

from gateway.api import native_type
from gateway.api.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolArgsDelta,
    ToolCallPart,
    UsageReport,
)
from translators.chat.mapping import finish_reason, now, usage_to_wire, wire_id
from translators.chat.reasoning import DetailCollector, details
from translators.chat.wire_out import (
    OutChoice,
    OutChunk,
    OutChunkChoice,
    OutCompletion,
    OutDelta,
    OutFunction,
    OutMessage,
    OutToolCall,
    OutUsage,
    encoder,
)

SSE_CONTENT_TYPE = "text/event-stream"
DONE = b"data: [DONE]\n\n"


def encode_chat_response(response: ChatResponse, request: ChatRequest) -> bytes:
    choices: list[OutChoice] = []
    for candidate in sorted(response.candidates, key=lambda c: c.index):
        text = "".join(p.text for p in candidate.parts if isinstance(p, TextPart))
        thinking = "".join(p.text for p in candidate.parts if isinstance(p, ThinkingPart) and not p.redacted)
        calls = [OutToolCall(id=p.id, type="function",
                             function=OutFunction(name=p.name, arguments=p.arguments))
                 for p in candidate.parts if isinstance(p, ToolCallPart)]
        message = OutMessage(content=text if text or not calls else None)
        if calls:
            message.tool_calls = calls
        if thinking:
            message.reasoning_content = thinking
        signed = details([p for p in candidate.parts if isinstance(p, ThinkingPart)])
        if signed:
            message.reasoning_details = signed
        choices.append(OutChoice(candidate.index, message, None, finish_reason(candidate.stop_reason)))
    out = OutCompletion(id=wire_id("chatcmpl-", response.id), created=response.created or now(),
                        model=response.model or request.model, choices=choices,
                        usage=usage_to_wire(response.usage))
    return encoder.encode(out)


def sse_event(payload: bytes) -> bytes:
    return b"data: " + payload + b"\n\n"


def sse_error(status: int, code: str, message: str) -> bytes:
    """The in-band error event OpenAI-style clients understand (the SDK raises on it)."""
    return sse_event(orjson.dumps({"error": {"message": message, "type": native_type(status), "code": code}}))


class ChatStreamEncoder:
    """Canonical stream events -> ``chat.completion.chunk`` SSE events, then ``data: [DONE]``."""

    content_type = SSE_CONTENT_TYPE

    def __init__(self, request: ChatRequest) -> None:
        self._request = request
        self._id = wire_id("chatcmpl-", None)
        self._created = now()
        self._model = request.model
        # With stream usage OpenAI writes ``"usage": null`` on every chunk but the usage chunk.
        self._usage_field: UnsetType | None = None if request.stream_usage else UNSET
        self._with_role: set[int] = set()  # candidates whose first delta (with the role) was sent
        self._tool_index: dict[tuple[int, int], int] = {}  # (candidate, part index) -> tool call index
        self._tool_count: dict[int, int] = {}
        self._usage_sent = False
        self._failed = False
        self._details = DetailCollector()

    def encode(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):
            return self._delta(event.candidate, OutDelta(content=event.text)) if event.text else b""
        if isinstance(event, ThinkingDelta):
            self._details.add(event.candidate, event.index, event.text, event.signature, event.origin)
            return self._delta(event.candidate, OutDelta(reasoning_content=event.text)) if event.text else b""
        if isinstance(event, ToolArgsDelta):
            index = self._tool_index.get((event.candidate, event.index))
            if index is None or not event.partial_json:
                return b""
            call = OutToolCall(index=index, function=OutFunction(arguments=event.partial_json))
            return self._delta(event.candidate, OutDelta(tool_calls=[call]))
        if isinstance(event, PartStart):
            return self._part_start(event)
        if isinstance(event, Finish):
            return self._chunk(event.candidate, OutDelta(), finish_reason(event.stop_reason))
        if isinstance(event, StreamStart):
            return self._start(event)
        if isinstance(event, UsageReport):
            if not self._request.stream_usage or self._usage_sent:
                return b""
            self._usage_sent = True
            return self._usage_chunk(usage_to_wire(event.usage))
        if isinstance(event, PartStop):  # a signed thought's entry, once its text is complete
            entry = self._details.stop(event.candidate, event.index)
            return self._delta(event.candidate, OutDelta(reasoning_details=[entry])) if entry else b""
        return b""

    def close(self) -> bytes:
        # After an in-band error there is no [DONE]: the stream did not end cleanly.
        return b"" if self._failed else DONE

    def error(self, status: int, code: str, message: str) -> bytes:
        self._failed = True
        return sse_error(status, code, message)

    # --- helpers -----------------------------------------------------------------------------------

    def _start(self, event: StreamStart) -> bytes:
        self._id = wire_id("chatcmpl-", event.id)
        self._created = event.created or self._created
        self._model = event.model or self._model
        return b"".join(self._delta(c, OutDelta(content="")) for c in range(self._request.n))

    def _part_start(self, event: PartStart) -> bytes:
        if event.kind in ("thinking", "redacted_thinking"):
            self._details.start(event.candidate, event.index, event.data, event.origin)
        if event.kind != "tool_call":
            return b""
        index = self._tool_count.get(event.candidate, 0)
        self._tool_count[event.candidate] = index + 1
        self._tool_index[(event.candidate, event.index)] = index
        call = OutToolCall(index=index, id=event.tool_call_id or wire_id("call_", None), type="function",
                           function=OutFunction(name=event.tool_name or "", arguments=""))
        return self._delta(event.candidate, OutDelta(tool_calls=[call]))

    def _delta(self, candidate: int, delta: OutDelta) -> bytes:
        return self._chunk(candidate, delta, None)

    def _chunk(self, candidate: int, delta: OutDelta, finish: str | None) -> bytes:
        if candidate not in self._with_role:  # the first delta of a choice carries the role
            self._with_role.add(candidate)
            delta.role = "assistant"
        chunk = OutChunk(id=self._id, created=self._created, model=self._model,
                         choices=[OutChunkChoice(candidate, delta, None, finish)], usage=self._usage_field)
        return sse_event(encoder.encode(chunk))

    def _usage_chunk(self, usage: OutUsage) -> bytes:
        chunk = OutChunk(id=self._id, created=self._created, model=self._model, choices=[], usage=usage)
        return sse_event(encoder.encode(chunk))
