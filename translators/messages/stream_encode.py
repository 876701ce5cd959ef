"""Client side, streamed: canonical stream events -> the message-protocol SSE stream.

The event order is exactly that of spec 4.7::

    message_start
    (content_block_start, content_block_delta*, content_block_stop)*
    message_delta            stop_reason, stop_sequence, usage (output and, when known, input/cache)
    message_stop

Each event is ``event: <name>\\ndata: <json>\\n\\n`` with ``type`` equal to the name; blocks carry an
integer ``index`` numbered 0, 1, 2... in the order they are opened on this wire, whatever the
canonical part indexes were.

The canonical contract says a PartStart precedes a part's deltas and parts never interleave, but
the encoder does not rely on it, so that any upstream's events come out well-formed: a delta with
no open block opens one, a new block closes the open one, and ``message_delta`` closes whatever is
still open. Events of candidates other than the first are dropped (the protocol has no ``n``).
Another protocol's signature (or redacted thinking) goes sealed in the block's one ``signature_delta``,
sent when the block closes, once the text the seal holds is complete (``gateway.relay.reasoning_state``).
``message_delta`` waits for the usage report (it follows Finish in canonical streams) or for
``close``, whichever comes first.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.api import native_type
from gateway.api.canonical import (
    ChatRequest,
    Finish,
    PartStart,
    PartStop,
    StreamEvent,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ThinkingPart,
    ToolArgsDelta,
    Usage,
    UsageReport,
)
from gateway.api.relay import seal
from translators.messages.mapping import stop_reason_out, usage_out
from translators.messages.response import FAMILY, message_id


def sse(name: str, data: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


_EMPTY_BLOCK: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": ""},
    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
}


class MessagesStreamEncoder:
    content_type = "text/event-stream"

    def __init__(self, request: ChatRequest) -> None:
        self._model = request.model
        self._started = False
        self._open: int | None = None  # canonical index of the open block
        self._open_kind: str | None = None
        self._wire_index = -1  # wire index of the open block (the last one opened)
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._usage: Usage | None = None
        self._delta_sent = False
        self._ended = False
        self._thought: list[str] = []  # the open thinking block's text, for a seal
        self._foreign: ThinkingPart | None = None  # another protocol's state of the open block

    # --- helpers -----------------------------------------------------------------------------------

    def _start(self, event: StreamStart | None = None) -> bytes:
        self._started = True
        usage = event.usage if event is not None and event.usage is not None else Usage()
        message: dict[str, Any] = {
            "id": message_id(event.id if event is not None else ""),
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_out(usage),
        }
        return sse("message_start", {"type": "message_start", "message": message})

    def _open_block(self, index: int, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close_block()
        self._wire_index += 1
        self._open, self._open_kind = index, kind
        self._thought, self._foreign = [], None
        return out + sse("content_block_start", {"type": "content_block_start", "index": self._wire_index,
                                                 "content_block": block})

    def _close_block(self) -> bytes:
        if self._open is None:
            return b""
        out = b""
        if self._foreign is not None and self._open_kind == "thinking":
            foreign = self._foreign
            if not foreign.redacted:
                foreign.text = "".join(self._thought)
            out = self._delta({"type": "signature_delta", "signature": seal(foreign)})
        self._open = self._open_kind = None
        self._foreign = None
        return out + sse("content_block_stop", {"type": "content_block_stop", "index": self._wire_index})

    def _ensure(self, index: int, kind: str) -> bytes:
        """Make sure a block of ``kind`` for canonical ``index`` is open (robustness, see above)."""
        if self._open == index and self._open_kind == kind:
            return b""
        if kind == "tool_call":
            block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_gw_{index}", "name": "", "input": {}}
        else:
            block = dict(_EMPTY_BLOCK[kind])
        return self._open_block(index, kind, block)

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse("content_block_delta", {"type": "content_block_delta", "index": self._wire_index,
                                           "delta": delta})

    def _message_delta(self) -> bytes:
        self._delta_sent = True
        out = self._close_block()
        reason = stop_reason_out(self._stop_reason)
        usage: dict[str, Any] = {"output_tokens": 0}
        if self._usage is not None:
            usage = usage_out(self._usage)
        return out + sse("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": reason,
                      "stop_sequence": self._stop_sequence if reason == "stop_sequence" else None},
            "usage": usage,
        })

    # --- StreamEncoder ----------------------------------------------------------------------------------

    def encode(self, event: StreamEvent) -> bytes:
        if self._ended or getattr(event, "candidate", 0) != 0:
            return b""
        if isinstance(event, StreamStart):
            return b"" if self._started else self._start(event)
        out = b"" if self._started else self._start()
        if self._delta_sent:  # nothing may follow message_delta but message_stop
            return out
        if isinstance(event, TextDelta):
            if not event.text:
                return out
            return out + self._ensure(event.index, "text") + self._delta(
                {"type": "text_delta", "text": event.text})
        if isinstance(event, ThinkingDelta):
            if not event.text and event.signature is None:
                return out
            out += self._ensure(event.index, "thinking")
            if event.text:
                self._thought.append(event.text)
                out += self._delta({"type": "thinking_delta", "thinking": event.text})
            if event.signature and event.origin not in (None, FAMILY):
                self._foreign = ThinkingPart(signature=event.signature, origin=event.origin)
            elif event.signature is not None:
                out += self._delta({"type": "signature_delta", "signature": event.signature})
            return out
        if isinstance(event, ToolArgsDelta):
            if not event.partial_json:
                return out
            return out + self._ensure(event.index, "tool_call") + self._delta(
                {"type": "input_json_delta", "partial_json": event.partial_json})
        if isinstance(event, PartStart):
            return out + self._part_start(event)
        if isinstance(event, PartStop):
            return out + (self._close_block() if self._open == event.index else b"")
        if isinstance(event, Finish):
            self._stop_reason, self._stop_sequence = event.stop_reason, event.stop_sequence
            return out + self._close_block()
        if isinstance(event, UsageReport):
            self._usage = event.usage
            return out + self._message_delta()
        return out

    def _part_start(self, event: PartStart) -> bytes:
        if event.kind == "tool_call":
            call_id = event.tool_call_id or f"toolu_gw_{event.index}"
            block: dict[str, Any] = {"type": "tool_use", "id": call_id, "name": event.tool_name or "",
                                     "input": {}}
        elif event.kind == "redacted_thinking" and event.origin not in (None, FAMILY):
            out = self._open_block(event.index, "thinking", dict(_EMPTY_BLOCK["thinking"]))
            self._foreign = ThinkingPart(redacted=True, data=event.data, origin=event.origin)
            return out
        elif event.kind == "redacted_thinking":
            block = {"type": "redacted_thinking", "data": event.data or ""}
        else:
            block = dict(_EMPTY_BLOCK[event.kind])
        return self._open_block(event.index, event.kind, block)

    def close(self) -> bytes:
        if self._ended:
            return b""
        out = b"" if self._started else self._start()
        if not self._delta_sent:
            out += self._message_delta()
        self._ended = True
        return out + sse("message_stop", {"type": "message_stop"})

    def error(self, status: int, code: str, message: str) -> bytes:
        self._ended = True
        return sse("error", {"type": "error", "error": {"type": native_type(status), "message": message,
                                                         "code": code}})
