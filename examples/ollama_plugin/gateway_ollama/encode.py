"""Canonical answers -> the Ollama wire: a whole ``/api/chat`` or ``/api/generate`` answer, or an
NDJSON stream of them.

Ollama streams one object per line with ``done: false`` and ends with one ``done: true`` line that
carries ``done_reason`` and the counts (``prompt_eval_count``, ``eval_count``). Tool calls arrive
whole, in a line of their own: the encoder collects a call's streamed argument fragments and writes
the call when its part ends. An error after the stream started is a line ``{"error": "..."}``,
which the official client raises as ``ResponseError``.
"""

from __future__ import annotations

from typing import Literal

import msgspec
import orjson
from gateway.api.canonical import (
    ChatRequest,
    ChatResponse,
    Finish,
    PartStart,
    PartStop,
    StopReason,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextPart,
    ThinkingDelta,
    ThinkingPart,
    ToolArgsDelta,
    ToolCallPart,
    Usage,
    UsageReport,
)

from gateway_ollama import wire
from gateway_ollama.mapping import created_at, done_reason
from gateway_ollama.ndjson import CONTENT_TYPE

Mode = Literal["chat", "generate"]


def tool_call(call_id: str, name: str, arguments: str) -> wire.ToolCall:
    """Arguments travel as a JSON object; anything else (a cut stream's fragment) becomes ``{}``."""
    try:
        valid = isinstance(orjson.loads(arguments or "{}"), dict)
    except orjson.JSONDecodeError:
        valid = False
    raw = msgspec.Raw(arguments.encode() if valid and arguments else b"{}")
    return wire.ToolCall(function=wire.ToolFunction(name=name, arguments=raw), id=call_id)


def _line(mode: Mode, model: str, *, content: str = "", thinking: str | None = None,
          tool_calls: list[wire.ToolCall] | None = None, done: bool = False,
          stop: StopReason | None = None, usage: Usage | None = None, stamp: str | None = None) -> bytes:
    stamp = stamp or created_at()
    reason = done_reason(stop) if done else None
    prompt = usage.input_tokens if usage is not None else None
    output = usage.output_tokens if usage is not None else None
    out: wire.ChatOut | wire.GenerateOut
    if mode == "chat":
        message = wire.OutMessage(role="assistant", content=content, thinking=thinking or None,
                                  tool_calls=tool_calls or None)
        out = wire.ChatOut(model=model, created_at=stamp, message=message, done=done, done_reason=reason,
                           prompt_eval_count=prompt, eval_count=output)
    else:
        out = wire.GenerateOut(model=model, created_at=stamp, response=content, thinking=thinking or None,
                               done=done, done_reason=reason, prompt_eval_count=prompt, eval_count=output)
    return wire.encoder.encode(out)


def encode_answer(mode: Mode, response: ChatResponse) -> bytes:
    candidate = response.candidates[0] if response.candidates else None
    parts = candidate.parts if candidate is not None else []
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    thinking = "".join(p.text for p in parts if isinstance(p, ThinkingPart) and not p.redacted)
    calls = [tool_call(p.id, p.name, p.arguments) for p in parts if isinstance(p, ToolCallPart)]
    stop = candidate.stop_reason if candidate is not None else None
    return _line(mode, response.model, content=text, thinking=thinking, tool_calls=calls, done=True,
                 stop=stop, usage=response.usage, stamp=created_at(response.created))


class _OpenCall:
    __slots__ = ("args", "id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.args: list[str] = []


class NdjsonEncoder:
    """Canonical events -> NDJSON lines (one encoder per stream)."""

    content_type = CONTENT_TYPE

    def __init__(self, mode: Mode, request: ChatRequest) -> None:
        self._mode = mode
        self._model = request.model
        self._calls: dict[int, _OpenCall] = {}
        self._stop: StopReason | None = None
        self._usage: Usage | None = None

    def encode(self, event: StreamEvent) -> bytes:
        if getattr(event, "candidate", 0) != 0:
            return b""  # Ollama has one answer per call
        if isinstance(event, StreamStart):
            self._model = event.model or self._model
        elif isinstance(event, TextDelta) and event.text:
            return self._out(content=event.text)
        elif isinstance(event, ThinkingDelta) and event.text:
            return self._out(thinking=event.text)
        elif isinstance(event, PartStart) and event.kind == "tool_call":
            self._calls[event.index] = _OpenCall(event.tool_call_id or f"call_{event.index}",
                                                 event.tool_name or "")
        elif isinstance(event, ToolArgsDelta) and event.index in self._calls:
            self._calls[event.index].args.append(event.partial_json)
        elif isinstance(event, PartStop) and event.index in self._calls:
            call = self._calls.pop(event.index)
            if self._mode == "chat":  # /api/generate has no tools
                return self._out(tool_calls=[tool_call(call.id, call.name, "".join(call.args))])
        elif isinstance(event, Finish):
            self._stop = event.stop_reason
        elif isinstance(event, UsageReport):
            self._usage = event.usage
        return b""

    def _out(self, content: str = "", thinking: str | None = None,
             tool_calls: list[wire.ToolCall] | None = None) -> bytes:
        line = _line(self._mode, self._model, content=content, thinking=thinking, tool_calls=tool_calls)
        return line + b"\n"

    def close(self) -> bytes:
        return _line(self._mode, self._model, done=True, stop=self._stop, usage=self._usage) + b"\n"

    def error(self, status: int, code: str, message: str) -> bytes:
        return render_error_line(message, code)


def render_error_line(message: str, code: str | None = None) -> bytes:
    body: dict[str, str] = {"error": message}
    if code:
        body["code"] = code
    return orjson.dumps(body) + b"\n"
