"""Same-format fast path: a v1beta client on a v1beta upstream.

The client's bytes go up unchanged (the model lives in the path, so aliasing only changes the
path) and the upstream's bytes come back unchanged; only ``usageMetadata`` and ``finishReason``
are read, with small view Structs, from the answer or from each streamed chunk.
"""

from __future__ import annotations

import re

import msgspec

from gateway.canonical import Usage
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
    """Relays every byte as it comes, reading usage from each chunk of either framing."""

    def __init__(self) -> None:
        self._splitter = ObjectSplitter()
        self._usage: Usage | None = None
        self._finished = False
        self._closed = False
        self._last = b""  # the last non-blank byte relayed

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
        self._see(self._splitter.feed(chunk))
        tail = chunk.rstrip()
        if tail:
            self._last = tail[-1:]
        return chunk

    def close(self) -> bytes:
        self._see(self._splitter.close())
        self._closed = True
        return b""

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
