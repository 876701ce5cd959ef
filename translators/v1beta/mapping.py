"""Finish reasons and usage between Gemini and canonical words, both directions."""

from __future__ import annotations

from typing import Any

from gateway.api.canonical import StopReason, Usage
from translators.v1beta.wire import UsageMetadata

_CONTENT_FILTER = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                             "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"})
_ERROR = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"})


def stop_reason(finish: str | None, called_tool: bool) -> StopReason | None:
    """Gemini ``finishReason`` -> canonical. Gemini says STOP after function calls too; the
    canonical model (and every other family) says ``tool_use`` then."""
    if finish is None:
        return None
    if finish == "MAX_TOKENS":
        return "max_tokens"
    if finish in _CONTENT_FILTER:
        return "content_filter"
    if finish in _ERROR:
        return "error"
    return "tool_use" if called_tool else "end_turn"


_FINISH = {"max_tokens": "MAX_TOKENS", "content_filter": "SAFETY", "error": "OTHER"}


def finish_reason(stop: StopReason | None) -> str:
    """Canonical -> Gemini: end_turn, tool_use and stop_sequence are all STOP on this wire."""
    return _FINISH.get(stop or "end_turn", "STOP")


def usage_from_wire(meta: UsageMetadata) -> Usage:
    """Gemini counts thoughts apart from candidates; canonical output includes reasoning. Cached
    tokens are already part of ``promptTokenCount``; tool-use prompt tokens (grounding) are not."""
    return Usage(input_tokens=meta.promptTokenCount + meta.toolUsePromptTokenCount,
                 output_tokens=meta.candidatesTokenCount + meta.thoughtsTokenCount,
                 cache_read_tokens=meta.cachedContentTokenCount,
                 reasoning_tokens=meta.thoughtsTokenCount)


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": max(usage.output_tokens - usage.reasoning_tokens, 0),
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        out["cachedContentTokenCount"] = usage.cache_read_tokens
    if usage.reasoning_tokens:
        out["thoughtsTokenCount"] = usage.reasoning_tokens
    return out
