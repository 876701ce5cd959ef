"""The response object of spec 2.5b (the Responses API's ``response``), and its output items.

Output items from a translated answer: thinking -> a ``reasoning`` item (its text as a summary, its
signature or redacted thinking sealed as ``encrypted_content`` (``gateway.relay.reasoning_state``) so that
a follow-up can hand it back and its upstream get it as issued), each run of text -> one
``message`` with ``output_text`` parts, each tool call -> a ``function_call`` whose ``call_id`` is
the upstream's call id. A ``max_tokens`` stop makes the response ``incomplete``.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec
from starlette.responses import Response

from gateway.api.canonical import ChatResponse, StopReason, TextPart, ThinkingPart, ToolCallPart, Usage
from gateway.api.relay import for_client
from translators.responses.wire import ResponsesRequest, SummaryText

Json = dict[str, Any]
FAMILY = "responses"


def json_body(obj: Any, status: int = 200) -> Response:
    """A JSON answer written with msgspec: what clients sent (tool schemas) may hold integers wider
    than 64 bits, which the stored and echoed response carries back."""
    return Response(msgspec.json.encode(obj), status_code=status, media_type="application/json")


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


class OutputText(msgspec.Struct):
    text: str
    type: str = "output_text"
    annotations: list[Any] = msgspec.field(default_factory=list)
    logprobs: list[Any] = msgspec.field(default_factory=list)


class OutputMessage(msgspec.Struct):
    id: str
    content: list[OutputText]
    status: str = "completed"
    type: str = "message"
    role: str = "assistant"


class FunctionCallOut(msgspec.Struct):
    id: str
    call_id: str
    name: str
    arguments: str
    status: str = "completed"
    type: str = "function_call"


class ReasoningOut(msgspec.Struct):
    id: str
    summary: list[SummaryText] = msgspec.field(default_factory=list)
    encrypted_content: str | None = None
    type: str = "reasoning"


OutputItem = OutputMessage | FunctionCallOut | ReasoningOut


@dataclass
class ResponseMeta:
    """Everything of a response object that its request fixes, known before the upstream answers."""

    id: str
    model: str  # the public model id
    request: ResponsesRequest
    created_at: int = field(default_factory=lambda: int(time.time()))

    def render(
        self,
        output: list[Json],
        *,
        status: str,
        usage: Json | None,
        incomplete_reason: str | None = None,
        error: Json | None = None,
    ) -> Json:
        r = self.request
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
            "instructions": r.instructions,
            "max_output_tokens": r.max_output_tokens,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": r.parallel_tool_calls is not False,
            "previous_response_id": r.previous_response_id,
            "reasoning": {
                "effort": r.reasoning.effort if r.reasoning else None,
                "summary": r.reasoning.summary if r.reasoning else None,
            },
            "store": r.store,
            "temperature": r.temperature,
            "text": msgspec.to_builtins(r.text) if r.text is not None else {"format": {"type": "text"}},
            "tool_choice": msgspec.to_builtins(r.tool_choice) if r.tool_choice is not None else "auto",
            "tools": msgspec.to_builtins(r.tools),
            "top_p": r.top_p,
            "truncation": r.truncation or "disabled",
            "usage": usage,
            "user": r.user,
            "metadata": dict(r.metadata or {}),
        }


def wire_usage(usage: Usage) -> Json:
    return {
        "input_tokens": usage.input_tokens,
        # ``cache_write_tokens``: what a message-protocol upstream wrote to its prompt cache.
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def canonical_usage(wire: Any) -> Usage | None:
    """Usage from a Responses ``usage`` object (a native upstream's); None when absent."""
    if not isinstance(wire, dict):
        return None
    inp, out = wire.get("input_tokens"), wire.get("output_tokens")
    if not isinstance(inp, int) or not isinstance(out, int):
        return None
    details, out_details = wire.get("input_tokens_details"), wire.get("output_tokens_details")
    details = details if isinstance(details, dict) else {}
    out_details = out_details if isinstance(out_details, dict) else {}
    return Usage(
        input_tokens=_count(inp),
        output_tokens=_count(out),
        cache_read_tokens=_count(details.get("cached_tokens")),
        cache_write_tokens=_count(details.get("cache_write_tokens")),
        reasoning_tokens=_count(out_details.get("reasoning_tokens")),
    )


def status_of(stop: StopReason | None) -> tuple[str, str | None]:
    """The response ``status`` and ``incomplete_details.reason`` for a canonical stop reason."""
    if stop == "max_tokens":
        return "incomplete", "max_output_tokens"
    if stop == "content_filter":
        return "incomplete", "content_filter"
    return "completed", None


def output_items(response: ChatResponse) -> list[OutputItem]:
    items: list[OutputItem] = []
    parts = response.candidates[0].parts if response.candidates else []
    message: OutputMessage | None = None
    for part in parts:
        if isinstance(part, TextPart):
            if message is None:
                message = OutputMessage(id=new_id("msg"), content=[])
                items.append(message)
            message.content.append(OutputText(part.text))
            continue
        message = None
        if isinstance(part, ToolCallPart):
            items.append(
                FunctionCallOut(id=new_id("fc"), call_id=part.id, name=part.name, arguments=part.arguments)
            )
        elif isinstance(part, ThinkingPart):
            summary = [SummaryText(part.text)] if part.text else []
            items.append(
                ReasoningOut(
                    id=new_id("rs"),
                    summary=summary,
                    encrypted_content=for_client(part, FAMILY),
                )
            )
    return items


def render_translated(meta: ResponseMeta, response: ChatResponse) -> Json:
    stop = response.candidates[0].stop_reason if response.candidates else None
    status, reason = status_of(stop)
    output: list[Json] = msgspec.to_builtins(output_items(response))
    return meta.render(output, status=status, usage=wire_usage(response.usage), incomplete_reason=reason)
