"""An Ollama upstream's NDJSON stream -> canonical stream events.

Each line may carry a ``thinking`` fragment, a ``content`` fragment and whole tool calls; the
last line has ``done: true``, the ``done_reason`` and the counts. Parts never interleave in the
canonical stream, so a switch between thinking and text closes the open part first. An
``{"error": ...}`` line is an upstream failure after the stream started: the relay ends the
client's stream with an error and meters what came before.
"""

from __future__ import annotations

from gateway.api import UpstreamError
from gateway.api.canonical import (
    Finish,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    UsageReport,
)
from gateway.api.wire import MAX_FRAME_BYTES

from gateway_ollama import wire
from gateway_ollama.mapping import epoch_of, new_id, stop_reason, usage_of
from gateway_ollama.ndjson import LineSplitter


class NdjsonDecoder:
    def __init__(self, *, max_line_bytes: int = MAX_FRAME_BYTES) -> None:
        self._lines = LineSplitter(max_line_bytes)  # ``limits.stream_element_bytes``
        self._started = False
        self._open: str | None = None  # kind of the open part: "text" | "thinking"
        self._index = -1
        self._called_tool = False
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for line in self._lines.feed(chunk):
            self._line(line, events)
        return events

    def close(self) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for line in self._lines.close():
            self._line(line, events)
        return events

    def _line(self, line: bytes, events: list[StreamEvent]) -> None:
        if self._complete:
            return
        answer = wire.chat_answer_decoder.decode(line)  # a line that is not JSON: the stream is broken
        if answer.error is not None:
            raise UpstreamError(f"The upstream stream failed: {answer.error}")
        if not self._started:
            self._started = True
            events.append(StreamStart(id=new_id("ollama-"), model=answer.model,
                                      created=epoch_of(answer.created_at)))
        message = answer.message
        if message.thinking:
            self._switch("thinking", events)
            events.append(ThinkingDelta(index=self._index, text=message.thinking))
        if message.content:
            self._switch("text", events)
            events.append(TextDelta(index=self._index, text=message.content))
        for call in message.tool_calls or []:
            self._switch(None, events)
            self._index += 1
            self._called_tool = True
            call_id = call.id or new_id("call_")
            events.append(PartStart(index=self._index, kind="tool_call", tool_call_id=call_id,
                                    tool_name=call.function.name))
            arguments = bytes(call.function.arguments).decode()
            events.append(ToolArgsDelta(index=self._index, partial_json=arguments))
            events.append(PartStop(index=self._index))
        if answer.done:
            self._switch(None, events)
            events.append(Finish(stop_reason=stop_reason(answer.done_reason, self._called_tool)))
            usage = usage_of(answer.prompt_eval_count, answer.eval_count)
            if usage is not None:
                events.append(UsageReport(usage))
            self._complete = True

    def _switch(self, kind: str | None, events: list[StreamEvent]) -> None:
        """Close the open part unless it is of ``kind``; open a part of ``kind`` if needed."""
        if self._open == kind:
            return
        if self._open is not None:
            events.append(PartStop(index=self._index))
        self._open = kind
        if kind is not None:
            self._index += 1
            events.append(PartStart(index=self._index, kind="text" if kind == "text" else "thinking"))
