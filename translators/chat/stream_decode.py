"""An OpenAI-compatible upstream's SSE stream (chat or legacy completions chunks) -> canonical events.

Per choice, deltas open canonical parts in arrival order: ``reasoning_content`` (or ``reasoning``)
a thinking part, ``content``/``text``/``refusal`` a text part, each new ``tool_calls[].index`` a
tool-call part; a change of kind closes the open part first (PartStop), and ``finish_reason``
closes it and emits Finish. OpenAI streams one tool call after another; should a server send a
fragment for a call it already left, the fragment is still passed on (under that call's part
index) rather than lost. The usage chunk becomes one UsageReport, emitted at ``[DONE]`` (or at the
end of the bytes when every choice finished but ``[DONE]`` never came).
"""

from __future__ import annotations

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
    Usage,
    UsageReport,
)
from gateway.api.relay import scrub_secrets
from gateway.api.wire import MAX_FRAME_BYTES, SSEParser
from translators.chat.mapping import now, stop_reason, usage_from_wire, wire_id
from translators.chat.wire import ChoiceView, MessageView, ToolCallView, answer_decoder


class _Choice:
    """Parts state of one choice (candidate)."""

    __slots__ = ("finished", "last_key", "next_index", "open_index", "open_kind", "tool_ids", "tools")

    def __init__(self) -> None:
        self.next_index = 0
        self.open_kind: str | None = None
        self.open_index = -1
        self.tools: dict[int, int] = {}  # wire tool-call index -> canonical part index
        self.tool_ids: dict[str, int] = {}  # tool-call id -> wire index, for servers that send no index
        self.last_key = -1
        self.finished = False

    def key_of(self, call: ToolCallView) -> int:
        if call.index is not None:
            key = call.index
        elif call.id:
            key = self.tool_ids.get(call.id, len(self.tools))
        else:  # a bare fragment continues the latest call
            key = self.last_key if self.last_key >= 0 else 0
        if call.id:
            self.tool_ids.setdefault(call.id, key)
        self.last_key = key
        return key


class ChatStreamDecoder:
    def __init__(self, request: ChatRequest, *, max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._request = request
        # Each ``data:`` line is a payload at once (OpenAI payloads are single-line JSON); one line
        # is held at most ``max_event_bytes`` (``limits.sse_event_bytes``).
        self._lines = SSEParser(each_data_line=True, max_event_bytes=max_event_bytes)
        self._choices: dict[int, _Choice] = {}
        self._started = False
        self._done = False
        self._usage: Usage | None = None
        self._usage_sent = False
        self.error: str | None = None  # an in-band upstream error message, if one came

    @property
    def complete(self) -> bool:
        return self._done

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event in self._lines.feed(chunk):
            self._payload(event.data, out)
        return out

    def close(self) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for event in self._lines.close():
            self._payload(event.data, out)
        if not self._done and self._choices and all(c.finished for c in self._choices.values()):
            self._end(out)  # every choice finished: a missing [DONE] loses nothing
        return out

    # --- payloads ----------------------------------------------------------------------------------

    def _payload(self, payload: bytes, out: list[StreamEvent]) -> None:
        if self._done:
            return
        if payload.strip() == b"[DONE]":
            for index, choice in self._choices.items():
                if not choice.finished:
                    self._close_part(index, choice, out)
                    choice.finished = True
                    out.append(Finish(stop_reason="end_turn", candidate=index))
            self._end(out)
            return
        try:
            chunk = answer_decoder.decode(payload)
        except msgspec.MsgspecError:
            return  # a keep-alive or vendor event that is not a chunk
        if chunk.error is not None:
            self.error = scrub_secrets(_error_text(chunk.error))
            return
        if not self._started:
            self._started = True
            out.append(StreamStart(id=chunk.id or wire_id("chatcmpl-", None),
                                   model=chunk.model or self._request.model,
                                   created=int(chunk.created or 0) or now()))
        for wire_choice in chunk.choices or []:
            self._choice(wire_choice, out)
        if chunk.usage is not None:
            self._usage = usage_from_wire(chunk.usage)

    def _end(self, out: list[StreamEvent]) -> None:
        self._done = True
        if self._usage is not None and not self._usage_sent:
            self._usage_sent = True
            out.append(UsageReport(usage=self._usage))

    def _choice(self, wire: ChoiceView, out: list[StreamEvent]) -> None:
        index = wire.index or 0
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _Choice()
        if state.finished:
            return
        delta = wire.delta or wire.message or MessageView()
        thinking = delta.reasoning_content or delta.reasoning
        if thinking:
            part = self._open(index, state, "thinking", out)
            out.append(ThinkingDelta(index=part, text=thinking, candidate=index))
        for text in (_text_of(delta.content), wire.text, delta.refusal):
            if text:
                part = self._open(index, state, "text", out)
                out.append(TextDelta(index=part, text=text, candidate=index))
        for call in delta.tool_calls or []:
            self._tool_call(index, state, call, out)
        if wire.finish_reason is not None:
            self._close_part(index, state, out)
            state.finished = True
            reason = stop_reason(wire.finish_reason)
            if reason == "end_turn" and state.tools:
                reason = "tool_use"  # some servers say "stop" after tool calls
            out.append(Finish(stop_reason=reason, candidate=index))

    def _tool_call(self, index: int, state: _Choice, call: ToolCallView, out: list[StreamEvent]) -> None:
        key = state.key_of(call)
        fn = call.function
        arguments = fn.arguments if fn is not None else None
        part = state.tools.get(key)
        if part is None:
            self._close_part(index, state, out)
            part = state.tools[key] = self._start(state, "tool_call")
            out.append(PartStart(index=part, kind="tool_call", candidate=index,
                                 tool_call_id=call.id or wire_id("call_", None),
                                 tool_name=(fn.name if fn is not None else None) or ""))
        if arguments:
            out.append(ToolArgsDelta(index=part, partial_json=arguments, candidate=index))

    # --- parts -------------------------------------------------------------------------------------

    def _open(self, index: int, state: _Choice, kind: str, out: list[StreamEvent]) -> int:
        if state.open_kind == kind:
            return state.open_index
        self._close_part(index, state, out)
        part = self._start(state, kind)
        out.append(PartStart(index=part, kind=kind, candidate=index))  # type: ignore[arg-type]
        return part

    @staticmethod
    def _start(state: _Choice, kind: str) -> int:
        part = state.next_index
        state.next_index += 1
        state.open_kind = kind
        state.open_index = part
        return part

    @staticmethod
    def _close_part(index: int, state: _Choice, out: list[StreamEvent]) -> None:
        if state.open_kind is not None:
            out.append(PartStop(index=state.open_index, candidate=index))
            state.open_kind = None
            state.open_index = -1


def _text_of(content: str | list[object] | None) -> str | None:
    if content is None or isinstance(content, str):
        return content
    texts = [str(p.get("text") or "") for p in content if isinstance(p, dict)]
    return "".join(texts)


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
