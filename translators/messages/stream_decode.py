"""Upstream side, streamed: a message-protocol SSE byte stream (any chunking) -> canonical events.

The bytes go through the core's SSE parser (``gateway.wire.sse``), one ``data`` payload per event;
the event name line is redundant (every payload carries ``type``) and is ignored.

Mapping, per upstream event:

* ``message_start`` -> StreamStart (usage: input and cache tokens, canonical semantics);
* ``content_block_start`` -> PartStart (text, thinking, tool_use -> tool_call, redacted_thinking);
  blocks of other types (server tools, their results) are skipped with all their deltas, and the
  canonical indexes stay dense;
* ``content_block_delta`` -> TextDelta / ThinkingDelta (``thinking_delta`` and ``signature_delta``)
  / ToolArgsDelta (``input_json_delta``); other delta types (citations) are skipped;
* ``content_block_stop`` -> PartStop;
* ``message_delta`` -> Finish (usage figures, cumulative, overwrite those of message_start);
* ``message_stop`` -> UsageReport, and ``complete`` becomes true;
* ``ping`` and unknown events are ignored; ``error`` ends the decoding without ``complete`` (so the
  relay answers the client with an in-band error) and keeps the upstream's words in
  ``error_message``. It does not raise: a stream that already started cannot fail over anyway.
"""

from __future__ import annotations

import time

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
from gateway.api.relay import scrub_secrets
from gateway.api.wire import MAX_FRAME_BYTES, SSEEvent, SSEParser
from translators.messages import wire
from translators.messages.mapping import merge_usage, stop_reason_in, thinking_share, usage_in

_KINDS = {"text": "text", "thinking": "thinking", "tool_use": "tool_call",
          "redacted_thinking": "redacted_thinking"}
PROTOCOL = "messages"  # the issuer of the signatures and redacted thinking read here


class MessagesStreamDecoder:
    def __init__(self, *, max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._parser = SSEParser(max_event_bytes=max_event_bytes)  # ``limits.sse_event_bytes``
        self._complete = False
        self._index: dict[int, int] = {}  # upstream block index -> canonical part index
        self._usage = wire.UsageView()
        self._usage_seen = False
        self._reported = False
        self._thinking: list[str] = []  # for the thinking share of the output (mapping.thinking_share)
        self._visible: list[str] = []  # text and tool calls, the rest of the output
        self.error_message: str | None = None  # set by an upstream ``error`` event

    @property
    def complete(self) -> bool:
        return self._complete

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        return self._handle(self._parser.feed(chunk))

    def close(self) -> list[StreamEvent]:
        events = self._handle(self._parser.close())
        if not self._reported and self._usage_seen:
            # A cut stream still reports what it used so far (the relay decides what to bill).
            events.append(self._report())
        return events

    def _handle(self, events: list[SSEEvent]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for sse in events:
            if self.error_message is not None or self._complete:
                break
            try:
                event = wire.event_decoder.decode(sse.data)
            except wire.DECODE_ERRORS:
                continue  # not JSON (a proxy's keep-alive or garbage): nothing to relay
            self._event(event, out)
        return out

    def _merge(self, view: wire.UsageView | None) -> None:
        self._usage_seen = merge_usage(self._usage, view) or self._usage_seen

    def _report(self) -> UsageReport:
        self._reported = True
        usage = usage_in(self._usage)
        assert usage is not None
        return UsageReport(usage=thinking_share(usage, "".join(self._thinking), "".join(self._visible)))

    def _event(self, event: wire.StreamEventView, out: list[StreamEvent]) -> None:
        kind = event.type
        if kind == "content_block_delta":
            self._block_delta(event, out)
        elif kind == "content_block_start":
            self._block_start(event, out)
        elif kind == "content_block_stop":
            if event.index in self._index:
                out.append(PartStop(index=self._index[event.index]))
        elif kind == "message_start":
            message = event.message or wire.MessageResponse()
            self._merge(message.usage)
            out.append(StreamStart(id=message.id, model=message.model, created=int(time.time()),
                                   usage=usage_in(message.usage)))
        elif kind == "message_delta":
            self._merge(event.usage)
            delta = event.delta or wire.StreamDelta()
            out.append(Finish(stop_reason=stop_reason_in(delta.stop_reason) or "end_turn",
                              stop_sequence=delta.stop_sequence))
        elif kind == "message_stop":
            self._complete = True
            out.append(self._report())
        elif kind == "error":
            error = event.error or wire.StreamError()
            said = f"{error.type}: {error.message}" if error.message else error.type
            self.error_message = scrub_secrets(said)

    def _block_start(self, event: wire.StreamEventView, out: list[StreamEvent]) -> None:
        block, upstream_index = event.content_block, event.index
        if block is None or upstream_index is None:
            return
        kind = _KINDS.get(block.type)
        if kind is None:
            return  # its deltas and stop find no canonical index and are skipped too
        index = self._index[upstream_index] = len(self._index)
        if kind == "tool_call":
            out.append(PartStart(index=index, kind="tool_call", tool_call_id=block.id, tool_name=block.name))
            self._visible.append(f"{block.name or ''} ")
            # The protocol starts tool_use with ``input: {}`` and streams the JSON; a non-empty
            # input here (some proxies send it whole) is the complete argument text.
            given = bytes(block.input).strip()
            if given not in (b"", b"{}", b"null"):
                self._visible.append(given.decode())
                out.append(ToolArgsDelta(index=index, partial_json=given.decode()))
        elif kind == "redacted_thinking":
            out.append(PartStart(index=index, kind="redacted_thinking", data=block.data, origin=PROTOCOL))
        else:
            out.append(PartStart(index=index, kind=kind))  # type: ignore[arg-type]
            if kind == "text" and block.text:
                out.append(TextDelta(index=index, text=block.text))
            elif kind == "thinking" and (block.thinking or block.signature):
                self._thinking.append(block.thinking or "")
                out.append(ThinkingDelta(index=index, text=block.thinking or "",
                                         signature=block.signature or None,
                                         origin=PROTOCOL if block.signature else None))

    def _block_delta(self, event: wire.StreamEventView, out: list[StreamEvent]) -> None:
        delta = event.delta
        index = self._index.get(event.index) if event.index is not None else None
        if delta is None or index is None:
            return
        kind = delta.type
        if kind == "text_delta":
            if delta.text:
                self._visible.append(delta.text)
                out.append(TextDelta(index=index, text=delta.text))
        elif kind == "input_json_delta":
            if delta.partial_json:
                self._visible.append(delta.partial_json)
                out.append(ToolArgsDelta(index=index, partial_json=delta.partial_json))
        elif kind == "thinking_delta":
            if delta.thinking:
                self._thinking.append(delta.thinking)
                out.append(ThinkingDelta(index=index, text=delta.thinking))
        elif kind == "signature_delta":
            if delta.signature:
                out.append(ThinkingDelta(index=index, signature=delta.signature, origin=PROTOCOL))
