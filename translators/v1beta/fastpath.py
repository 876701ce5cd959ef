"""Same-format fast path: a v1beta client on a v1beta upstream.

The client's bytes go up unchanged (the model lives in the path, so aliasing only changes the
path) and the upstream's bytes come back unchanged; only ``usageMetadata`` and ``finishReason``
are read, with small view Structs, from the answer or from each streamed chunk.
"""

from __future__ import annotations

import re

import msgspec

from gateway.api.canonical import Usage
from gateway.api.wire import MAX_FRAME_BYTES
from translators.v1beta import wire
from translators.v1beta.framing import ObjectSplitter
from translators.v1beta.mapping import usage_from_wire


def usage_of(body: bytes) -> Usage | None:
    """Usage of a whole generateContent answer (None when it has none or is unreadable)."""
    try:
        view = wire.USAGE_VIEW_DECODER.decode(body)
    except msgspec.DecodeError:
        return None
    return usage_from_wire(view.usageMetadata) if view.usageMetadata is not None else None


def restore_model_version(body: bytes, upstream_model: str, public_model: str) -> bytes:
    """An aliased model's answer names the public model in ``modelVersion``, not the upstream's."""
    pattern = rb'("modelVersion"\s*:\s*")' + re.escape(upstream_model.encode()) + rb'"'
    return re.sub(pattern, lambda m: m.group(1) + public_model.encode() + b'"', body, count=1)


class GeminiFastStream:
    """Relays the upstream's bytes as they come, in whole objects (an object split across chunks
    waits for its end, within ``limits``: ``framing.ObjectSplitter``), reading usage from each one,
    in either framing.

    For an aliased model (``rename`` = (upstream id, public id)) the bytes cannot pass unchanged:
    every chunk names the upstream's model in ``modelVersion``. Then each whole object is re-framed
    in the client's framing (``sse`` or the JSON array) with the public id instead, so that the
    stream never shows what the non-streamed answer hides."""

    def __init__(self, rename: tuple[str, str] | None = None, *, sse: bool = False,
                 max_event_bytes: int = MAX_FRAME_BYTES, max_element_bytes: int = MAX_FRAME_BYTES) -> None:
        self._splitter = ObjectSplitter(max_event_bytes=max_event_bytes, max_element_bytes=max_element_bytes,
                                        relay=True)
        self._usage: Usage | None = None
        self._finished = False
        self._closed = False
        self._last = b""  # the last non-blank byte relayed
        self._rename = rename
        self._sse = sse
        self._opened = False  # re-framing an array: ``[`` was sent
        self._array_closed = False

    def _see(self, objects: list[bytes]) -> None:
        for data in objects:
            try:
                view = wire.CHUNK_VIEW_DECODER.decode(data)
            except msgspec.DecodeError:
                continue
            if view.usageMetadata is not None:
                self._usage = usage_from_wire(view.usageMetadata)
            if any(c.finishReason for c in view.candidates or []):
                self._finished = True
            elif not view.candidates and view.promptFeedback is not None and view.promptFeedback.blockReason:
                self._finished = True

    def feed(self, chunk: bytes) -> bytes:
        objects = self._splitter.feed(chunk)
        self._see(objects)
        return self._reframe(objects) if self._rename is not None else self._pass()

    def close(self) -> bytes:
        objects = self._splitter.close()
        self._see(objects)
        self._closed = True
        return self._reframe(objects) if self._rename is not None else self._pass()

    def _pass(self) -> bytes:
        out = self._splitter.passed
        tail = out.rstrip()
        if tail:
            self._last = tail[-1:]
        return out

    def _reframe(self, objects: list[bytes]) -> bytes:
        assert self._rename is not None
        upstream, public = self._rename
        out = bytearray()
        for data in objects:
            # Outside strings JSON has no raw line breaks that matter; inside, they are escaped.
            data = restore_model_version(data, upstream, public).replace(b"\r", b" ").replace(b"\n", b" ")
            if self._sse:
                out += b"data: " + data + b"\r\n\r\n"
            else:
                out += (b"," if self._opened else b"[") + b"\r\n" + data
                self._opened = True
        if not self._sse and self._splitter.array_ended and not self._array_closed:
            out += b"" if self._opened else b"["
            out += b"]"
            self._opened = self._array_closed = True
        tail = bytes(out).rstrip()
        if tail:
            self._last = tail[-1:]
        return bytes(out)

    def array_error_prefix(self) -> bytes:
        """What goes before an error object appended to the relayed JSON array."""
        if not self._last:
            return b"["
        return b"" if self._last in (b"[", b",") else b",\r\n"

    @property
    def usage(self) -> Usage | None:
        return self._usage

    @property
    def complete(self) -> bool:
        return self._closed and self._finished
