"""Upstreams that speak the Responses API themselves (a ``chat`` upstream with the feature
``responses``): the client's request goes to their ``/v1/responses`` nearly as it is.

What changes on the way up: the model id (aliasing), ``input`` (the whole conversation the gateway
rebuilt, since the upstream must never be handed a ``previous_response_id`` it did not issue),
``store: false`` (the gateway keeps the state). Built-in tools and every field the gateway does
not know pass untouched. On the way down the response keeps its items as they are (built-in tool
results included) but is renamed: the gateway's response id, the public model id, the client's own
``previous_response_id`` and ``store``. Reasoning items without ``encrypted_content`` are left out
of the history sent up: an upstream that stored nothing cannot resolve their ids.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gateway.api import UpstreamCall, UpstreamError
from gateway.api.canonical import Usage
from gateway.api.relay import estimate_text_tokens, unseal
from gateway.api.wire import MAX_FRAME_BYTES, SSEParser
from translators.responses.request import ClientRequest
from translators.responses.response import FAMILY, Json, ResponseMeta, canonical_usage
from translators.responses.stream_encode import CONTENT_TYPE, sse

FEATURE = "responses"
PATH = "/v1/responses"
TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


def native_call(client: ClientRequest, history: list[Json], upstream_model: str) -> UpstreamCall:
    body: Json = msgspec.json.decode(client.body)
    body["model"] = upstream_model
    body["input"] = [item for item in (*history, *client.raw_items) if _sendable(item)]
    body.pop("previous_response_id", None)
    body["store"] = False
    return UpstreamCall(path=PATH, body=msgspec.json.encode(body))


def _sendable(item: Json) -> bool:
    """Reasoning goes up only with state this protocol issued: not without any, not with another
    protocol's (sealed by the gateway when a translated answer carried it)."""
    if item.get("type") != "reasoning":
        return True
    state = item.get("encrypted_content")
    if not isinstance(state, str) or not state:
        return False
    sealed = unseal(state)
    return sealed is None or sealed.origin == FAMILY


def rename(response: Json, meta: ResponseMeta) -> Json:
    """The upstream's response object as the gateway's own."""
    r = meta.request
    response.update(id=meta.id, model=meta.model, previous_response_id=r.previous_response_id, store=r.store)
    response.setdefault("created_at", meta.created_at)
    output = response.get("output")
    if isinstance(output, list):  # items are objects; anything else could not be stored or replayed
        response["output"] = [item for item in output if isinstance(item, dict)]
    return response


def native_response(data: bytes, meta: ResponseMeta) -> tuple[Json, Usage | None]:
    try:
        response = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise UpstreamError("The upstream answered with a body that is not a Responses object.") from exc
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        raise UpstreamError("The upstream answered with a body that is not a Responses object.")
    return rename(response, meta), canonical_usage(response.get("usage"))


class NativeStream:
    """A native upstream's event stream, relayed event by event with the response renamed. The
    terminal event is held back until ``close`` (so that the turn can be stored before the client
    receives it); its response becomes ``final``."""

    content_type = CONTENT_TYPE

    def __init__(self, meta: ResponseMeta, input_estimate: int, *,
                 max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._meta = meta
        self._input_estimate = input_estimate
        self._parser = SSEParser(max_event_bytes=max_event_bytes)  # ``limits.sse_event_bytes``
        self._held: bytes = b""
        self._done = False
        self.final: Json | None = None
        self.usage_seen: Usage | None = None
        self.texts: list[str] = []
        self._seq = 0

    def feed(self, chunk: bytes) -> bytes:
        return b"".join(self._event(e.data) for e in self._parser.feed(chunk))

    def _event(self, payload: bytes) -> bytes:
        if not payload.strip() or payload == b"[DONE]":
            return b""
        event: Any = msgspec.json.decode(payload)
        if not isinstance(event, dict):
            return b""
        kind = event.get("type")
        number = event.get("sequence_number")
        if isinstance(number, int):
            self._seq = max(self._seq, number + 1)
        if isinstance(event.get("delta"), str):
            self.texts.append(event["delta"])
        if isinstance(event.get("response"), dict):
            rename(event["response"], self._meta)
        if kind in TERMINAL:
            self._done = kind != "response.failed"
            response = event.get("response")
            if isinstance(response, dict):
                self.usage_seen = canonical_usage(response.get("usage"))
                self.final = response if self._done else None
            self._held = sse(event)
            return b""
        return sse(event)

    def close(self) -> bytes:
        try:
            tail = b"".join(self._event(e.data) for e in self._parser.close())
        except msgspec.DecodeError:
            tail = b""  # the half of an event a cut stream left: dropped, the relay reports the cut
        held, self._held = self._held, b""
        return tail + held

    @property
    def complete(self) -> bool:
        return self._done

    def usage(self) -> Usage:
        """What the upstream reported, else an estimate (flagged) from the relayed text."""
        if self.usage_seen is not None:
            return self.usage_seen
        output = sum(estimate_text_tokens(t) for t in self.texts)
        return Usage(input_tokens=self._input_estimate, output_tokens=output, estimated=True)

    def error(self, status: int, code: str, message: str) -> bytes:
        self.final = None
        event = {
            "type": "error",
            "sequence_number": self._seq,
            "code": code,
            "message": message,
            "param": None,
        }
        return sse(event)
