"""Same-format fast path: a message-protocol client on a message-protocol upstream.

The client's bytes go up unchanged, except the ``model`` value when the public id is an alias of
another upstream id (only that top-level value is re-encoded; every other field keeps its bytes).
The ``anthropic-beta`` header the client sent is passed on. Answers come back unchanged except
that the public model id is restored in them when the upstream names another.

``FastStream`` relays stream chunks as they arrive and reads usage from ``message_start`` and
``message_delta``. Only chunks that contain one of those event names (or ``message_stop``) are
split into lines at all; text deltas go through untouched and unparsed. The one event it may
rewrite is ``message_start`` (to restore the public model id); everything else is passed byte
for byte.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from gateway.canonical import Usage
from gateway.translation import RequestView, UpstreamCall
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
    """Until the first ``data:`` line (message_start) is complete, an unfinished line is held back
    so that message_start can be rewritten whole; from then on every chunk is returned as it came
    and the unfinished last line is only remembered, for reading usage from a split event."""

    def __init__(self, public_model: str) -> None:
        self._public_model = public_model
        self._started = False  # the first data line has been seen (and sent)
        self._tail = b""  # the unfinished last line (held back before start, already sent after)
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
        if not self._started:
            return self._feed_start(chunk)
        if not self._tail and not any(name in chunk for name in _INTERESTING):
            # The common case, content deltas only: nothing to read. A chunk ending mid-line may
            # hide the start of an interesting line, so its unfinished last line is remembered.
            cut = chunk.rfind(b"\n")
            self._tail = chunk[cut + 1:]
            return chunk
        buffer = self._tail + chunk
        cut = buffer.rfind(b"\n")
        done, self._tail = buffer[: cut + 1], buffer[cut + 1:]
        if any(name in done for name in _INTERESTING):
            for line in done.split(b"\n"):
                self._read(line)
        return chunk

    def _feed_start(self, chunk: bytes) -> bytes:
        buffer = self._tail + chunk
        lines = buffer.split(b"\n")
        self._tail = lines.pop()
        for i, line in enumerate(lines):
            if line.startswith(b"data:"):
                self._started = True
                lines[i] = self._read(line, rewrite=True)
                for later in lines[i + 1:]:  # the chunk may hold more events, even the whole stream
                    self._read(later)
                # The unfinished tail goes out now too; it stays remembered for a split event.
                return b"\n".join(lines) + b"\n" + self._tail
        return b"\n".join(lines) + b"\n" if lines else b""

    def _read(self, line: bytes, *, rewrite: bool = False) -> bytes:
        """Take usage (and completion) from one line; the line, with the public model id restored
        when ``rewrite`` and it is a message_start naming another model."""
        if not line.startswith(b"data:") or not any(name in line for name in _INTERESTING):
            return line
        try:
            event = wire.event_decoder.decode(line[5:])
        except wire.DECODE_ERRORS:
            return line
        if event.type == "message_start" and event.message is not None:
            self._merge(event.message.usage)
            if rewrite and event.message.model and event.message.model != self._public_model:
                try:
                    data = orjson.loads(line[5:])
                except orjson.JSONDecodeError:  # bad UTF-8 in a field the view skipped
                    return line
                data["message"]["model"] = self._public_model
                return b"data: " + orjson.dumps(data) + (b"\r" if line.endswith(b"\r") else b"")
        elif event.type == "message_delta":
            self._merge(event.usage)
        elif event.type == "message_stop":
            self._complete = True
        return line

    def _merge(self, view: wire.UsageView | None) -> None:
        self._usage_seen = merge_usage(self._usage, view) or self._usage_seen

    def close(self) -> bytes:
        tail, self._tail = self._tail, b""
        if not self._started:
            self._started = True
            return self._read(tail, rewrite=True)  # held back: still to be sent
        self._read(tail)  # a last line without its newline: already sent, usage only
        return b""
