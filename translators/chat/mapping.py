"""Small value mappings between the OpenAI wire and the canonical model: usage, finish reasons,
reasoning effort, data URLs and ids."""

from __future__ import annotations

import secrets
import time

from gateway.api.canonical import StopReason, Usage
from translators.chat.wire import UsageWire
from translators.chat.wire_out import OutCompletionDetails, OutPromptDetails, OutUsage

_FINISH_TO_WIRE: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "content_filter": "content_filter",
    "error": "stop",
}
_FINISH_FROM_WIRE: dict[str, StopReason] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "content_filter",
}


def finish_reason(stop: StopReason | None) -> str:
    return _FINISH_TO_WIRE.get(stop or "end_turn", "stop")


def stop_reason(finish: str | None) -> StopReason | None:
    if finish is None:
        return None
    return _FINISH_FROM_WIRE.get(finish, "end_turn")


def usage_from_wire(wire: UsageWire) -> Usage:
    """OpenAI usage is already canonical in meaning: prompt includes cached, completion reasoning."""
    cached = 0
    if wire.prompt_tokens_details is not None and wire.prompt_tokens_details.cached_tokens:
        cached = wire.prompt_tokens_details.cached_tokens
    elif wire.prompt_cache_hit_tokens:
        cached = wire.prompt_cache_hit_tokens
    reasoning = 0
    if wire.completion_tokens_details is not None and wire.completion_tokens_details.reasoning_tokens:
        reasoning = wire.completion_tokens_details.reasoning_tokens
    output = wire.completion_tokens
    if output is None and wire.total_tokens is not None:
        output = max(wire.total_tokens - (wire.prompt_tokens or 0), 0)
    return Usage(input_tokens=wire.prompt_tokens or 0, output_tokens=output or 0,
                 cache_read_tokens=cached, reasoning_tokens=reasoning)


def usage_to_wire(usage: Usage, *, details: bool = True) -> OutUsage:
    out = OutUsage(prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens,
                   total_tokens=usage.input_tokens + usage.output_tokens)
    if details:
        out.prompt_tokens_details = OutPromptDetails(cached_tokens=usage.cache_read_tokens)
        out.completion_tokens_details = OutCompletionDetails(reasoning_tokens=usage.reasoning_tokens)
    return out


def effort_for_budget(budget_tokens: int) -> str:
    """A thinking token budget as an OpenAI ``reasoning_effort`` level."""
    if budget_tokens <= 1024:
        return "low"
    if budget_tokens <= 8192:
        return "medium"
    return "high"


def wire_id(prefix: str, canonical_id: str | None) -> str:
    """An id in OpenAI's shape (``chatcmpl-...``, ``cmpl-...``) for a canonical id of any origin."""
    if not canonical_id:
        return prefix + secrets.token_hex(12)
    return canonical_id if canonical_id.startswith(prefix) else prefix + canonical_id


def now() -> int:
    return int(time.time())
