"""Canonical stream events -> the Responses API's server-sent events.

The order the openai SDK's stream accumulator expects, every event with its ``sequence_number``:
``response.created``, ``response.in_progress``; per output item ``response.output_item.added``,
then for a message ``response.content_part.added``, ``response.output_text.delta``...,
``response.output_text.done``, ``response.content_part.done``; for a function call
``response.function_call_arguments.delta``..., ``response.function_call_arguments.done``; for
reasoning the ``response.reasoning_summary_*`` events; then ``response.output_item.done``; at the
end ``response.completed`` (or ``response.incomplete``) with the whole response and its usage.
The final event is only made by ``complete`` (the stream's close), once the usage is known.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api.canonical import (
    Finish,
    PartStart,
    PartStop,
    StopReason,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingPart,
    ToolArgsDelta,
    Usage,
    UsageReport,
)
from gateway.api.relay import for_client
from translators.responses.response import (
    FAMILY,
    FunctionCallOut,
    Json,
    OutputItem,
    OutputMessage,
    OutputText,
    ReasoningOut,
    ResponseMeta,
    new_id,
    status_of,
    wire_usage,
)
from translators.responses.wire import SummaryText

CONTENT_TYPE = "text/event-stream"


def sse(event: Json) -> bytes:
    # msgspec, not orjson: a client's tool schema (echoed in the response) may hold integers wider
    # than 64 bits.
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + msgspec.json.encode(event) + b"\n\n"


class ResponsesStreamEncoder:
    content_type = CONTENT_TYPE

    def __init__(self, meta: ResponseMeta) -> None:
        self._meta = meta
        self._seq = 0
        self.items: list[OutputItem] = []
        self._open: OutputItem | None = None  # the item whose parts are streaming
        self._kinds: dict[int, str] = {}  # canonical part index -> its kind
        self._stop: StopReason | None = None
        self.usage: Usage | None = None
        self.texts: list[str] = []  # everything generated, for an estimate when no usage comes
        self.final: Json | None = None  # the response object of the final event, once made
        self._signed: ThinkingPart | None = None  # the open reasoning item's signature, to seal

    def _event(self, type_: str, **fields: Any) -> bytes:
        event = {"type": type_, "sequence_number": self._seq, **fields}
        self._seq += 1
        return sse(event)

    @property
    def _index(self) -> int:
        return len(self.items) - 1

    def _shell(self, status: str) -> Json:
        return self._meta.render([], status=status, usage=None)

    def start(self) -> bytes:
        return self._event("response.created", response=self._shell("in_progress")) + self._event(
            "response.in_progress", response=self._shell("in_progress")
        )

    def encode(self, event: StreamEvent) -> bytes:
        if isinstance(event, PartStart):
            self._kinds[event.index] = event.kind
            return self._part_start(event)
        if isinstance(event, TextDelta) and isinstance(self._open, OutputMessage):
            self.texts.append(event.text)
            part = self._open.content[-1]
            part.text += event.text
            return self._event(
                "response.output_text.delta",
                item_id=self._open.id,
                output_index=self._index,
                content_index=len(self._open.content) - 1,
                delta=event.text,
                logprobs=[],
            )
        if isinstance(event, ToolArgsDelta) and isinstance(self._open, FunctionCallOut):
            self.texts.append(event.partial_json)
            self._open.arguments += event.partial_json
            return self._event(
                "response.function_call_arguments.delta",
                item_id=self._open.id,
                output_index=self._index,
                delta=event.partial_json,
            )
        if isinstance(event, ThinkingDelta) and isinstance(self._open, ReasoningOut):
            return self._thinking_delta(event, self._open)
        if isinstance(event, PartStop):
            return self._part_stop(self._kinds.get(event.index, ""))
        if isinstance(event, Finish):
            if event.candidate == 0:
                self._stop = event.stop_reason
            return self._close_item()
        if isinstance(event, UsageReport):
            self.usage = event.usage
        return b""  # StreamStart (answered by ``start``), deltas of other candidates

    def _part_start(self, event: PartStart) -> bytes:
        out = b""
        if event.kind == "text":
            if not isinstance(self._open, OutputMessage):
                out += self._close_item()
                out += self._add(OutputMessage(id=new_id("msg"), content=[], status="in_progress"))
            assert isinstance(self._open, OutputMessage)
            self._open.content.append(OutputText(""))
            return out + self._event(
                "response.content_part.added",
                item_id=self._open.id,
                output_index=self._index,
                content_index=len(self._open.content) - 1,
                part=msgspec.to_builtins(OutputText("")),
            )
        out += self._close_item()
        if event.kind == "tool_call":
            return out + self._add(
                FunctionCallOut(
                    id=new_id("fc"),
                    call_id=event.tool_call_id or new_id("call"),
                    name=event.tool_name or "",
                    arguments="",
                    status="in_progress",
                )
            )
        redacted = ThinkingPart(redacted=True, data=event.data, origin=event.origin)
        return out + self._add(ReasoningOut(id=new_id("rs"), encrypted_content=for_client(redacted, FAMILY)))

    def _add(self, item: OutputItem) -> bytes:
        self.items.append(item)
        self._open = item
        return self._event(
            "response.output_item.added", output_index=self._index, item=msgspec.to_builtins(item)
        )

    def _thinking_delta(self, event: ThinkingDelta, item: ReasoningOut) -> bytes:
        if event.signature:  # sealed with the whole summary text when the item closes
            self._signed = ThinkingPart(signature=event.signature, origin=event.origin)
        if not event.text:
            return b""
        self.texts.append(event.text)
        out = b""
        if not item.summary:
            item.summary.append(SummaryText(""))
            out += self._event(
                "response.reasoning_summary_part.added",
                item_id=item.id,
                output_index=self._index,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
        item.summary[0].text += event.text
        return out + self._event(
            "response.reasoning_summary_text.delta",
            item_id=item.id,
            output_index=self._index,
            summary_index=0,
            delta=event.text,
        )

    def _part_stop(self, kind: str) -> bytes:
        item = self._open
        if kind == "text" and isinstance(item, OutputMessage):
            part = item.content[-1]
            index = len(item.content) - 1
            return self._event(
                "response.output_text.done",
                item_id=item.id,
                output_index=self._index,
                content_index=index,
                text=part.text,
                logprobs=[],
            ) + self._event(
                "response.content_part.done",
                item_id=item.id,
                output_index=self._index,
                content_index=index,
                part=msgspec.to_builtins(part),
            )
        if isinstance(item, FunctionCallOut | ReasoningOut):
            return self._close_item()
        return b""

    def _close_item(self) -> bytes:
        item, self._open = self._open, None
        if item is None:
            return b""
        out = b""
        signed, self._signed = self._signed, None
        if isinstance(item, ReasoningOut) and signed is not None:
            signed.text = item.summary[0].text if item.summary else ""
            item.encrypted_content = for_client(signed, FAMILY)
        if isinstance(item, FunctionCallOut):
            out += self._event(
                "response.function_call_arguments.done",
                item_id=item.id,
                output_index=self._index,
                name=item.name,
                arguments=item.arguments,
            )
        elif isinstance(item, ReasoningOut) and item.summary:
            text = item.summary[0].text
            out += self._event(
                "response.reasoning_summary_text.done",
                item_id=item.id,
                output_index=self._index,
                summary_index=0,
                text=text,
            ) + self._event(
                "response.reasoning_summary_part.done",
                item_id=item.id,
                output_index=self._index,
                summary_index=0,
                part={"type": "summary_text", "text": text},
            )
        if isinstance(item, OutputMessage | FunctionCallOut):
            item.status = "completed"
        index = self.items.index(item)
        return out + self._event(
            "response.output_item.done", output_index=index, item=msgspec.to_builtins(item)
        )

    def complete(self, usage: Usage) -> bytes:
        """The final event: the whole response, with ``usage``."""
        out = self._close_item()
        status, reason = status_of(self._stop)
        self.final = self._meta.render(
            msgspec.to_builtins(self.items), status=status, usage=wire_usage(usage), incomplete_reason=reason
        )
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return out + self._event(kind, response=self.final)

    def error(self, status: int, code: str, message: str) -> bytes:
        self.final = None
        return self._event("error", code=code, message=message, param=None)
