"""The response cache's seam in the relay (CONTRACT 7; the cache itself is ``plugins.cache``).

The relay asks the cache, through the ``gateway_cache_lookup`` hook, about each generation once
the caller and the model are known; the cache answers with a ``CacheLookup`` (or None when it does
not serve the call). The relay then either answers from the kept answer (``relay.cache_serve``) or
calls the upstream, and hands the answer of a call that ended complete and charged to
``gateway_cache_store``. What is kept is the canonical answer, so that one entry serves the call
whole or streamed, in the client's own family: ``response_events`` replays it as a stream's
events, ``events_response`` rebuilds it from a stream's.
"""

from __future__ import annotations

import msgspec

from gateway.relay.canonical import (
    Candidate,
    ChatResponse,
    Finish,
    Part,
    PartStart,
    PartStop,
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

CACHE_HEADER = "X-Gateway-Cache"


class KeptAnswer(msgspec.Struct):
    """One kept answer: canonical, ``response.model`` the model that served it (a fallback's id
    when one did), ``response.usage`` what the upstream reported for it."""

    response: ChatResponse
    user_id: int
    created_at: float  # Unix seconds, by the cache's clock


class CacheLookup(msgspec.Struct):
    """The cache's verdict on one call."""

    key: str  # the cache's own name for the call's entry (opaque to the relay)
    hit: KeptAnswer | None = None  # the answer to serve; None: a miss
    store: bool = True  # keep this call's answer once complete (False under ``no-store``)
    hit_price_ratio: float = 0.0  # the share of the kept answer's cost a hit is charged
    entry_bytes: int = 1024 * 1024  # the largest answer kept: a stream stops collecting past it


def cache_headers(lookup: CacheLookup | None) -> dict[str, str]:
    """``X-Gateway-Cache: hit|miss`` on a call the cache serves; nothing otherwise."""
    if lookup is None:
        return {}
    return {CACHE_HEADER: "hit" if lookup.hit is not None else "miss"}


def keepable(response: ChatResponse) -> bool:
    """An answer worth keeping: every candidate finished, none on an error."""
    candidates = response.candidates
    return bool(candidates) and all(c.stop_reason not in (None, "error") for c in candidates)


def response_events(response: ChatResponse) -> list[StreamEvent]:
    """The stream of ``response``: each candidate's parts in order, their ends, then the usage."""
    events: list[StreamEvent] = [StreamStart(id=response.id, model=response.model, created=response.created)]
    for cand in response.candidates:
        c = cand.index
        for i, part in enumerate(cand.parts):
            if isinstance(part, TextPart):
                events += [PartStart(i, "text", candidate=c), TextDelta(i, part.text, candidate=c)]
            elif isinstance(part, ThinkingPart) and part.redacted:
                events.append(PartStart(i, "redacted_thinking", candidate=c, data=part.data,
                                        origin=part.origin))
            elif isinstance(part, ThinkingPart):
                events += [PartStart(i, "thinking", candidate=c, origin=part.origin),
                           ThinkingDelta(i, part.text, candidate=c)]
                if part.signature is not None:
                    events.append(ThinkingDelta(i, "", signature=part.signature, candidate=c,
                                                origin=part.origin))
            elif isinstance(part, ToolCallPart):
                events += [PartStart(i, "tool_call", candidate=c, tool_call_id=part.id, tool_name=part.name),
                           ToolArgsDelta(i, part.arguments, candidate=c)]
            else:  # an answer holds no request-only parts (images, documents, tool results)
                continue
            events.append(PartStop(i, candidate=c))
    events += [Finish(c.stop_reason, c.stop_sequence, candidate=c.index) for c in response.candidates]
    events.append(UsageReport(response.usage))
    return events


class _Building(msgspec.Struct):
    part: Part
    pieces: list[str] = []


def events_response(events: list[StreamEvent], usage: Usage) -> ChatResponse | None:
    """The whole answer a stream's ``events`` told (None when they hold no start), with ``usage``."""
    start = next((e for e in events if isinstance(e, StreamStart)), None)
    if start is None:
        return None
    parts: dict[int, dict[int, _Building]] = {}
    finishes: dict[int, Finish] = {}
    for event in events:
        if isinstance(event, PartStart):
            parts.setdefault(event.candidate, {})[event.index] = _Building(_new_part(event), [])
        elif isinstance(event, TextDelta | ToolArgsDelta):
            building = parts.get(event.candidate, {}).get(event.index)
            if building is not None:
                building.pieces.append(event.text if isinstance(event, TextDelta) else event.partial_json)
        elif isinstance(event, ThinkingDelta):
            building = parts.get(event.candidate, {}).get(event.index)
            if building is not None and isinstance(building.part, ThinkingPart):
                building.pieces.append(event.text)
                if event.signature is not None:
                    building.part.signature = event.signature
        elif isinstance(event, Finish):
            finishes[event.candidate] = event
    candidates = []
    for c in sorted(set(parts) | set(finishes)):
        finish = finishes.get(c)
        built = [_finished(b) for _, b in sorted(parts.get(c, {}).items())]
        candidates.append(Candidate(index=c, parts=built, stop_reason=finish.stop_reason if finish else None,
                                    stop_sequence=finish.stop_sequence if finish else None))
    return ChatResponse(id=start.id, model=start.model, created=start.created, candidates=candidates,
                        usage=usage)


def _new_part(event: PartStart) -> Part:
    if event.kind == "tool_call":
        return ToolCallPart(id=event.tool_call_id or "", name=event.tool_name or "")
    if event.kind == "redacted_thinking":
        return ThinkingPart(redacted=True, data=event.data, origin=event.origin)
    if event.kind == "thinking":
        return ThinkingPart(origin=event.origin)
    return TextPart("")


def _finished(building: _Building) -> Part:
    part, text = building.part, "".join(building.pieces)
    if isinstance(part, TextPart | ThinkingPart):
        part.text = text
    elif isinstance(part, ToolCallPart):
        part.arguments = text or "{}"
    return part
