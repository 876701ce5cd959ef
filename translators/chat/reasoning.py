"""Opaque reasoning state on the chat wire, which has no standard field for it.

The gateway uses ``reasoning_details``, the shape OpenRouter defined and LiteLLM and others read:
a ``reasoning.text`` entry holds a signed thought (its text and ``signature``), a
``reasoning.encrypted`` entry opaque reasoning (``data``), and ``format`` names the issuer. State
goes out as its upstream issued it; a client that hands the entries back on its assistant message
gets that state to the upstream unchanged (``gateway.relay.reasoning_state`` keeps other upstreams from
seeing it). ``reasoning_content`` keeps carrying the readable text.
"""

from __future__ import annotations

from gateway.api.canonical import ThinkingPart
from gateway.api.relay import from_client, state_of, unseal
from translators.chat.wire import ReasoningDetail
from translators.chat.wire_out import OutReasoningDetail

FAMILY = "chat"
_FORMATS = {"messages": "anthropic-claude-v1", "v1beta": "google-gemini-v1",
            "responses": "openai-responses-v1"}
_ORIGINS = {v: k for k, v in _FORMATS.items()}


def detail(part: ThinkingPart, index: int) -> OutReasoningDetail | None:
    """The entry for a thinking part with opaque state (None without any)."""
    state = state_of(part)
    if state is None:
        return None
    fmt = _FORMATS.get(part.origin or "", "unknown")
    if part.redacted:
        return OutReasoningDetail(type="reasoning.encrypted", data=state, format=fmt, index=index)
    return OutReasoningDetail(type="reasoning.text", text=part.text, signature=state, format=fmt, index=index)


def details(parts: list[ThinkingPart]) -> list[OutReasoningDetail]:
    return [d for i, p in enumerate(parts) if (d := detail(p, i)) is not None]


def thinking_parts(entries: list[ReasoningDetail]) -> list[ThinkingPart]:
    """The thinking parts of a client's ``reasoning_details`` that carry opaque state."""
    out: list[ThinkingPart] = []
    for entry in entries:
        if entry.type == "reasoning.encrypted" and entry.data:
            part = from_client(FAMILY, data=entry.data)
        elif entry.type == "reasoning.text" and entry.signature:
            part = from_client(FAMILY, text=entry.text or "", signature=entry.signature)
        else:
            continue
        if unseal(entry.data or entry.signature or "") is None:
            part.origin = _ORIGINS.get(entry.format or "", FAMILY)
        out.append(part)
    return out


class DetailCollector:
    """Per streamed thinking part, its text and state, for the entry sent when the part ends."""

    def __init__(self) -> None:
        self._parts: dict[tuple[int, int], ThinkingPart] = {}
        self._count: dict[int, int] = {}

    def start(self, candidate: int, index: int, data: str | None, origin: str | None) -> None:
        redacted = data is not None
        self._parts[(candidate, index)] = ThinkingPart(redacted=redacted, data=data, origin=origin)

    def add(self, candidate: int, index: int, text: str, signature: str | None, origin: str | None) -> None:
        part = self._parts.setdefault((candidate, index), ThinkingPart())
        part.text += text
        if signature:
            part.signature, part.origin = signature, origin

    def stop(self, candidate: int, index: int) -> OutReasoningDetail | None:
        part = self._parts.pop((candidate, index), None)
        if part is None:
            return None
        n = self._count.get(candidate, 0)
        entry = detail(part, n)
        if entry is not None:
            self._count[candidate] = n + 1
        return entry
