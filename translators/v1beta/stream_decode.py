"""A Gemini upstream's stream (either framing, any chunking) as canonical stream events.

Gemini sends whole parts per chunk: a text or thought part carries the next piece of text, a
function call arrives complete. Consecutive pieces of one kind are one canonical part: a new
PartStart is emitted when the kind changes (text, thought, function call), and the open part is
stopped then or when the candidate finishes. ``usageMetadata`` is cumulative, so the last one seen
is the usage; it is reported once, when the stream ends.
"""

from __future__ import annotations

import time
import uuid
from typing import Literal

import msgspec

from gateway.api.canonical import (
    ChatRequest,
    Finish,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallPart,
    Usage,
    UsageReport,
)
from gateway.api.wire import MAX_FRAME_BYTES
from translators.v1beta import wire
from translators.v1beta.framing import ObjectSplitter
from translators.v1beta.mapping import stop_reason, usage_from_wire
from translators.v1beta.parts import PROTOCOL, CallIds

Kind = Literal["text", "thinking"]


class _CandidateState:
    def __init__(self) -> None:
        self.index = -1  # canonical index of the current (or last) part
        self.open: Kind | None = None
        self.called_tool = False
        self.finished = False


def calls_in(request: ChatRequest) -> int:
    return sum(1 for m in request.messages for p in m.parts if isinstance(p, ToolCallPart))


class GeminiStreamDecoder:
    def __init__(self, request: ChatRequest, *, max_event_bytes: int = MAX_FRAME_BYTES,
                 max_element_bytes: int = MAX_FRAME_BYTES) -> None:
        self._model = request.model
        self._ids = CallIds(start=calls_in(request))
        # Within ``limits.sse_event_bytes`` / ``limits.stream_element_bytes``.
        self._splitter = ObjectSplitter(max_event_bytes=max_event_bytes, max_element_bytes=max_element_bytes)
        self._started = False
        self._candidates: dict[int, _CandidateState] = {}
        self._usage: Usage | None = None
        self._saw_finish = False
        self._closed = False

    @property
    def complete(self) -> bool:
        return self._closed and self._saw_finish

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for obj in self._splitter.feed(chunk):
            self._on_object(obj, events)
        return events

    def close(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for obj in self._splitter.close():
            self._on_object(obj, events)
        for ci, state in self._candidates.items():
            if state.open is not None:  # cut short: end the part, but there is no Finish to report
                events.append(PartStop(index=state.index, candidate=ci))
                state.open = None
        if self._usage is not None:
            events.append(UsageReport(usage=self._usage))
        self._closed = True
        return events

    def _on_object(self, data: bytes, events: list[StreamEvent]) -> None:
        try:
            chunk = wire.RESPONSE_DECODER.decode(data)
        except msgspec.DecodeError:
            return  # not a response object (keep-alive noise); an incomplete stream shows in `complete`
        if chunk.error is not None:
            return
        if not self._started:
            self._started = True
            meta = chunk.usageMetadata
            start_usage = Usage(input_tokens=meta.promptTokenCount) if meta and meta.promptTokenCount \
                else None
            events.append(StreamStart(id=chunk.responseId or f"gen-{uuid.uuid4().hex[:24]}",
                                      model=chunk.modelVersion or self._model, created=int(time.time()),
                                      usage=start_usage))
        if chunk.usageMetadata is not None:
            self._usage = usage_from_wire(chunk.usageMetadata)
        for cand in chunk.candidates or []:
            self._on_candidate(cand, events)
        if not chunk.candidates and chunk.promptFeedback is not None and chunk.promptFeedback.blockReason:
            state = self._candidates.setdefault(0, _CandidateState())
            if not state.finished:
                state.finished = self._saw_finish = True
                events.append(Finish(stop_reason="content_filter", candidate=0))

    def _on_candidate(self, cand: wire.Candidate, events: list[StreamEvent]) -> None:
        ci = cand.index
        state = self._candidates.setdefault(ci, _CandidateState())
        if state.finished:
            return
        for part in (cand.content.parts if cand.content is not None else []):
            if part.thought:
                self._switch(state, ci, "thinking", events)
                if part.text or part.thoughtSignature:
                    events.append(ThinkingDelta(index=state.index, text=part.text or "",
                                                signature=part.thoughtSignature, candidate=ci,
                                                origin=PROTOCOL if part.thoughtSignature else None))
                continue
            if part.thoughtSignature:  # a signature riding on a non-thought part: its own thinking part
                self._switch(state, ci, None, events)
                self._switch(state, ci, "thinking", events)
                events.append(ThinkingDelta(index=state.index, signature=part.thoughtSignature, candidate=ci,
                                            origin=PROTOCOL))
                self._switch(state, ci, None, events)
            if part.functionCall is not None:
                self._switch(state, ci, None, events)
                call = part.functionCall
                state.index += 1
                state.called_tool = True
                events.append(PartStart(index=state.index, kind="tool_call", candidate=ci,
                                        tool_call_id=self._ids.call(call.name, call.id), tool_name=call.name))
                args = msgspec.json.encode(call.args or {}).decode()
                events.append(ToolArgsDelta(index=state.index, partial_json=args, candidate=ci))
                events.append(PartStop(index=state.index, candidate=ci))
                continue
            text = _text_of(part)
            if text:
                self._switch(state, ci, "text", events)
                events.append(TextDelta(index=state.index, text=text, candidate=ci))
        if cand.finishReason:
            self._switch(state, ci, None, events)
            state.finished = self._saw_finish = True
            events.append(Finish(stop_reason=stop_reason(cand.finishReason, state.called_tool), candidate=ci))

    @staticmethod
    def _switch(state: _CandidateState, ci: int, kind: Kind | None, events: list[StreamEvent]) -> None:
        """Make ``kind`` the open part (None: close whatever is open)."""
        if state.open == kind:
            return
        if state.open is not None:
            events.append(PartStop(index=state.index, candidate=ci))
            state.open = None
        if kind is not None:
            state.index += 1
            state.open = kind
            events.append(PartStart(index=state.index, kind=kind, candidate=ci))


def _text_of(part: wire.Part) -> str:
    if part.text is not None:
        return part.text
    if part.executableCode is not None:
        return f"```{part.executableCode.language.lower()}\n{part.executableCode.code}\n```"
    if part.codeExecutionResult is not None:
        return part.codeExecutionResult.output or ""
    return ""  # inline media has no canonical stream event
