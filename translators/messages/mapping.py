"""Small mappings shared by the client and upstream sides: usage and stop reasons.

Usage semantics differ: the message protocol's ``input_tokens`` EXCLUDES the prompt-cache tokens
(``cache_creation_input_tokens`` and ``cache_read_input_tokens`` are reported beside it), while the
canonical ``Usage.input_tokens`` includes them. Both directions go through here.
"""

from __future__ import annotations

from typing import Any

from gateway.api.canonical import StopReason, Usage
from gateway.api.relay import estimate_text_tokens
from translators.messages.wire import UsageView

# Upstream stop reason -> canonical. ``pause_turn`` (a server tool paused a long turn) has no
# canonical equivalent; the turn did end, so it reads as ``end_turn``.
_STOP_IN: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "refusal": "content_filter",
    "pause_turn": "end_turn",
    "model_context_window_exceeded": "max_tokens",
}

# Canonical -> client wire.
_STOP_OUT: dict[str, str] = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "tool_use": "tool_use",
    "content_filter": "refusal",
    "error": "end_turn",
}


def stop_reason_in(value: str | None) -> StopReason | None:
    if value is None:
        return None
    return _STOP_IN.get(value, "end_turn")


def stop_reason_out(value: str | None) -> str:
    return _STOP_OUT.get(value or "end_turn", "end_turn")


def thinking_share(usage: Usage, thinking: str, visible: str) -> Usage:
    """The protocol counts thinking inside ``output_tokens`` without saying how much of it. When the
    upstream gave no figure and there was thinking, the share is the output less an estimate of the
    ``visible`` rest (text, tool calls): the thinking text may be a summary of what was generated
    and billed, the visible rest is what it is. Should the estimate reach the whole output, the
    output is split in proportion to the two estimates instead. Other families show the share
    (``reasoning_tokens``, ``thoughtsTokenCount``); the output, the totals and so the charge stay
    the upstream's."""
    output = usage.output_tokens
    if usage.reasoning_tokens or not thinking or not output:
        return usage
    rest = estimate_text_tokens(visible)
    if rest < output:
        usage.reasoning_tokens = output - rest
    else:
        think = estimate_text_tokens(thinking)
        usage.reasoning_tokens = min(round(output * think / (think + rest)), output)
    return usage


def usage_in(view: UsageView | None) -> Usage | None:
    """Upstream usage -> canonical (cache tokens added back into ``input_tokens``)."""
    if view is None:
        return None
    write = view.cache_creation_input_tokens or 0
    read = view.cache_read_input_tokens or 0
    details = view.output_tokens_details
    thinking = (details.thinking_tokens or 0) if details is not None else 0
    return Usage(input_tokens=(view.input_tokens or 0) + write + read, output_tokens=view.output_tokens or 0,
                 cache_write_tokens=write, cache_read_tokens=read, reasoning_tokens=thinking)


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "output_tokens_details")


def merge_usage(into: UsageView, view: UsageView | None) -> bool:
    """Stream usage figures are cumulative: each one present overwrites the earlier value (a
    ``message_delta`` may repeat or omit the input figures of ``message_start``). True if any."""
    if view is None:
        return False
    for field in _USAGE_FIELDS:
        value = getattr(view, field)
        if value is not None:
            setattr(into, field, value)
    return True


def usage_out(usage: Usage) -> dict[str, Any]:
    """Canonical usage -> the message object's ``usage`` (cache tokens taken out of ``input_tokens``;
    reasoning, which ``output_tokens`` includes, also shown as ``output_tokens_details``)."""
    out: dict[str, Any] = {
        "input_tokens": max(usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0),
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.output_tokens,
    }
    if usage.reasoning_tokens:
        out["output_tokens_details"] = {"thinking_tokens": usage.reasoning_tokens}
    return out
