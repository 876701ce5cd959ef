"""Canonical stream events as a ``streamGenerateContent`` stream, in either framing.

Every text or thought delta becomes one GenerateContentResponse chunk at once; a function call is
held until its arguments are complete (Gemini sends calls whole). Another protocol's signature or
redacted thinking is sealed when its part ends (the seal holds the part's whole text) and goes out
then on an empty thought part (``gateway.relay.reasoning_state``). Finish reasons and usage arrive
last, so they go in one final chunk written by ``close``, as Gemini's own last chunk carries them.
"""

from __future__ import annotations

from typing import Any

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
    ThinkingPart,
    ToolArgsDelta,
    Usage,
    UsageReport,
)
from gateway.api.relay import seal
from translators.v1beta.family import render as render_error
from translators.v1beta.mapping import finish_reason, usage_to_wire
from translators.v1beta.parts import PROTOCOL, parse_args


class _Part:
    def __init__(self, kind: str, call_id: str | None = None, name: str | None = None) -> None:
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.args: list[str] = []
        self.had_text = False
        self.signature: str | None = None
        self.text: list[str] = []
        self.foreign: ThinkingPart | None = None  # another protocol's state, sealed at the end


class GeminiStreamEncoder:
    def __init__(self, request: ChatRequest, *, sse: bool) -> None:
        self.sse = sse
        self.content_type = "text/event-stream" if sse else "application/json"
        thinking = request.thinking
        self._include_thoughts = thinking is not None and thinking.enabled and thinking.include_thoughts
        self._id = ""
        self._model = request.model
        self.started = False  # a frame went out (the array's ``[`` with it)
        # What must precede an in-band error in the array framing, when bytes other than this
        # encoder's went out first (a fast-path stream): set by the frontend.
        self.error_prefix: bytes | None = None
        self._parts: dict[tuple[int, int], _Part] = {}
        self._signature: dict[int, str] = {}  # per candidate, for the next part to carry
        self._finish: dict[int, str] = {}
        self._usage: Usage | None = None

    # --- framing -----------------------------------------------------------------------------

    def _frame(self, obj: dict[str, Any], started: bool) -> bytes:
        data = msgspec.json.encode(obj)
        if self.sse:
            return b"data: " + data + b"\r\n\r\n"
        return (b",\r\n" if started else b"[") + data

    def _emit(self, candidate: int, parts: list[dict[str, Any]]) -> bytes:
        pending = self._signature.pop(candidate, None)
        if pending is not None and parts:
            parts[0]["thoughtSignature"] = pending
        obj = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": candidate}],
               "modelVersion": self._model, "responseId": self._id}
        out = self._frame(obj, self.started)
        self.started = True
        return out

    # --- events ------------------------------------------------------------------------------

    def encode(self, event: StreamEvent) -> bytes:
        if isinstance(event, TextDelta):
            return self._emit(event.candidate, [{"text": event.text}]) if event.text else b""
        if isinstance(event, ThinkingDelta):
            return self._thinking(event)
        if isinstance(event, ToolArgsDelta):
            part = self._parts.get((event.candidate, event.index))
            if part is not None:
                part.args.append(event.partial_json)
            return b""
        if isinstance(event, PartStart):
            part = _Part(event.kind, event.tool_call_id, event.tool_name)
            if event.kind == "redacted_thinking" and event.data:
                part.foreign = ThinkingPart(redacted=True, data=event.data, origin=event.origin)
            self._parts[(event.candidate, event.index)] = part
            return b""
        if isinstance(event, PartStop):
            return self._stop(event)
        if isinstance(event, Finish):
            self._finish[event.candidate] = finish_reason(event.stop_reason)
            return b""
        if isinstance(event, UsageReport):
            self._usage = event.usage
            return b""
        if isinstance(event, StreamStart):
            self._id = event.id
            self._model = event.model or self._model
        return b""

    def _thinking(self, event: ThinkingDelta) -> bytes:
        part = self._parts.get((event.candidate, event.index))
        if part is None:
            return b""
        out = b""
        part.text.append(event.text)
        if event.text and self._include_thoughts:
            part.had_text = True
            out = self._emit(event.candidate, [{"text": event.text, "thought": True}])
        if event.signature and event.origin not in (None, PROTOCOL):
            part.foreign = ThinkingPart(signature=event.signature, origin=event.origin)
        elif event.signature:
            if part.had_text:  # signed after its text (message protocol): an empty signed thought
                out += self._emit(event.candidate, [{"text": "", "thought": True,
                                                     "thoughtSignature": event.signature}])
            else:
                part.signature = event.signature
        return out

    def _stop(self, event: PartStop) -> bytes:
        part = self._parts.pop((event.candidate, event.index), None)
        if part is None:
            return b""
        if part.foreign is not None:
            if not part.foreign.redacted:
                part.foreign.text = "".join(part.text)
            return self._emit(event.candidate, [{"text": "", "thought": True,
                                                 "thoughtSignature": seal(part.foreign)}])
        if part.kind == "thinking" and part.signature:
            self._signature[event.candidate] = part.signature  # rides on the next part
        if part.kind != "tool_call":
            return b""
        call = {"id": part.call_id, "name": part.name or "", "args": parse_args("".join(part.args))}
        return self._emit(event.candidate, [{"functionCall": call}])

    def _final(self) -> dict[str, Any]:
        candidates = []
        for ci in sorted(set(self._finish) | set(self._signature)):
            content: dict[str, Any] = {"role": "model"}
            sig = self._signature.get(ci)
            if sig is not None:
                content["parts"] = [{"text": "", "thought": True, "thoughtSignature": sig}]
            cand: dict[str, Any] = {"content": content, "index": ci}
            if ci in self._finish:
                cand["finishReason"] = self._finish[ci]
            candidates.append(cand)
        obj: dict[str, Any] = {"candidates": candidates or [{"content": {"role": "model"}, "index": 0}]}
        if self._usage is not None:
            obj["usageMetadata"] = usage_to_wire(self._usage)
        obj["modelVersion"] = self._model
        obj["responseId"] = self._id
        return obj

    def close(self) -> bytes:
        # No state changes here: the relay may call close() and then send error() instead.
        out = self._frame(self._final(), self.started)
        return out if self.sse else out + b"]"

    def error(self, status: int, code: str, message: str) -> bytes:
        body = render_error(status, code, message)
        if self.sse:
            return b"data: " + body + b"\r\n\r\n"
        prefix = self.error_prefix if self.error_prefix is not None else b",\r\n" if self.started else b"["
        return prefix + body + b"]"
