"""Client side, outbound: a canonical ``ChatResponse`` -> the message object of spec 2.6.

Content blocks keep the canonical order, which every upstream produces as thinking, then text,
then tool calls (the order spec 4.7 rule 2 asks for). Thinking from an upstream that does not sign
its reasoning is sent with an empty ``signature`` (the field is required by the SDKs); another
protocol's signature or redacted thinking goes sealed in ``signature`` (``gateway.relay.reasoning_state``).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import orjson

from gateway.api.canonical import ChatRequest, ChatResponse, Part, TextPart, ThinkingPart, ToolCallPart
from gateway.api.relay import for_client
from translators.messages.mapping import stop_reason_out, usage_out

FAMILY = "messages"

_NOT_ID_CHARS = re.compile(r"[^A-Za-z0-9_]")


def message_id(canonical_id: str) -> str:
    """``msg_...``: the canonical id when it is already message-shaped, else derived from it (so
    the same upstream answer keeps the same id), else random."""
    if canonical_id.startswith("msg_"):
        return canonical_id
    tail = _NOT_ID_CHARS.sub("", canonical_id)
    return "msg_" + (tail or uuid.uuid4().hex)


def tool_input(arguments: str) -> Any:
    """Tool arguments (JSON text) as the ``input`` object; text that is not a JSON object (a model
    that produced broken JSON) is kept visible rather than dropped."""
    if not arguments.strip():
        return {}
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def content_block(part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        state = for_client(part, FAMILY)
        if part.redacted and part.origin in (None, FAMILY):
            return {"type": "redacted_thinking", "data": state or ""}
        # Another protocol's redacted thinking: an empty thinking block holding it sealed.
        return {"type": "thinking", "thinking": "" if part.redacted else part.text, "signature": state or ""}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input(part.arguments)}
    return None  # images, documents and tool results never appear in an answer


def encode_response(response: ChatResponse, request: ChatRequest) -> bytes:
    candidate = response.candidates[0] if response.candidates else None
    blocks: list[dict[str, Any]] = []
    stop_reason = "end_turn"
    stop_sequence = None
    if candidate is not None:
        blocks = [b for b in map(content_block, candidate.parts) if b is not None]
        stop_reason = stop_reason_out(candidate.stop_reason)
        stop_sequence = candidate.stop_sequence if stop_reason == "stop_sequence" else None
    message = {
        "id": message_id(response.id),
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": blocks,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage_out(response.usage),
    }
    return orjson.dumps(message)
