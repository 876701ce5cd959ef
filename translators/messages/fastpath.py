"""Same-format fast path: a message-protocol client on a message-protocol upstream.

The client's bytes go up unchanged, except the ``model`` value when the public id is an alias of
another upstream id (only that top-level value is re-encoded; every other field keeps its bytes).
The ``anthropic-beta`` header the client sent is passed on. Answers come back unchanged except
that the public model id is restored in them when the upstream names another.

``FastStream`` relays whole events as they complete (``gateway.wire.sse.EventBlocks``) and reads
usage from ``message_start`` and ``message_delta`` with the core's SSE parser, which passes over
blocks of events that name none of those (or ``message_stop``) unparsed: text deltas go through
untouched. The one event it may rewrite is ``message_start`` (to restore the public model id);
everything else is passed byte for byte.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from gateway.api import RequestView, UpstreamCall
from gateway.api.canonical import Usage
from gateway.api.wire import MAX_FRAME_BYTES, EventBlocks, SSEEvent, SSEParser, event_data, split_events
from translators.messages import wire
from translators.messages.mapping import merge_usage, usage_in
from translators.messages.upstream import MESSAGES_PATH


def _with_model(body: bytes, model: str) -> bytes:
    """``body`` (a JSON object) with its top-level ``model`` replaced; other values keep their bytes."""
    fields: dict[str, Any] = wire.fields_decoder.decode(body)
    fields["model"] = msgspec.Raw(orjson.dumps(model))
    return msgspec.json.encode(fields)


def fast_request(body: bytes, view: RequestView, upstream_model: str, beta: str | None) -> UpstreamCall:
    if upstream_model != view.model:
        body = _with_model(body, upstream_model)
    headers = {"anthropic-beta": beta} if beta else {}
    return UpstreamCall(path=MESSAGES_PATH, body=body, headers=headers)


def fast_usage(body: bytes) -> Usage | None:
    try:
        return usage_in(wire.usage_decoder.decode(body).usage)
    except wire.DECODE_ERRORS:
        return None


def fast_response(body: bytes, public_model: str) -> bytes:
    try:
        model = wire.model_decoder.decode(body).model
    except wire.DECODE_ERRORS:
        return body  # not ours to fix: the client sees what the upstream sent
    if not isinstance(model, str) or model == public_model:
        return body
    return _with_model(body, public_model)


_INTERESTING = (b"message_start", b"message_delta", b"message_stop")


class FastStream:
    """Relays whole events, each as soon as its blank line is in, byte for byte but for the first
    event with data (message_start), rewritten whole. An event split across chunks waits for its
    end, at most ``max_event_bytes`` of it (``limits.sse_event_bytes``): so an error event that
    ends a cut stream never lands inside a half-sent one. The same whole events go to an SSE
    parser for usage and completion."""

    def __init__(self, public_model: str, *, max_event_bytes: int = MAX_FRAME_BYTES) -> None:
        self._public_model = public_model
        self._started = False  # the first data event has been seen (and sent)
        self._events = EventBlocks(max_event_bytes)
        self._parser = SSEParser(max_event_bytes=max_event_bytes)
        self._usage = wire.UsageView()
        self._usage_seen = False
        self._complete = False

    @property
    def usage(self) -> Usage | None:
        return usage_in(self._usage) if self._usage_seen else None

    @property
    def complete(self) -> bool:
        return self._complete

    def feed(self, chunk: bytes) -> bytes:
        block = self._events.feed(chunk)
        if not block:
            return b""
        self._read(self._parser.feed_unless(block, _INTERESTING))
        return block if self._started else self._start(block)

    def close(self) -> bytes:
        tail = self._events.close()
        self._read(self._parser.feed(tail) + self._parser.close())
        if self._started:
            return tail
        self._started = True
        return self._start(tail)

    def _start(self, block: bytes) -> bytes:
        """``block`` (whole events, or the held bytes at the end) with the public model restored in
        its first data event, if it has one (which starts the stream)."""
        events = split_events(block)
        for i, event in enumerate(events):
            data = event_data(event)
            if data is not None:
                self._started = True
                events[i] = self._rewrite(event, data)
                break
        return b"".join(events)

    def _rewrite(self, event: bytes, data: bytes) -> bytes:
        if b"message_start" not in data:
            return event
        try:
            view = wire.event_decoder.decode(data)
        except wire.DECODE_ERRORS:
            return event
        if view.type != "message_start" or view.message is None:
            return event
        if not view.message.model or view.message.model == self._public_model:
            return event
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:  # bad UTF-8 in a field the view skipped
            return event
        obj["message"]["model"] = self._public_model
        # Only a one-line payload is replaced in place (the protocol never splits one).
        return event.replace(data, orjson.dumps(obj), 1)

    def _read(self, events: list[SSEEvent]) -> None:
        """Usage and completion from the events the parser completed."""
        for sse in events:
            if not any(name in sse.data for name in _INTERESTING):
                continue
            try:
                event = wire.event_decoder.decode(sse.data)
            except wire.DECODE_ERRORS:
                continue
            if event.type == "message_start" and event.message is not None:
                self._merge(event.message.usage)
            elif event.type == "message_delta":
                self._merge(event.usage)
            elif event.type == "message_stop":
                self._complete = True

    def _merge(self, view: wire.UsageView | None) -> None:
        self._usage_seen = merge_usage(self._usage, view) or self._usage_seen
