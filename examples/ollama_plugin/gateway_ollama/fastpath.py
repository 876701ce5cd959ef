"""The same-format fast path (client and upstream both speak Ollama): client bytes up, upstream
bytes down, with only what metering needs read on the way.

The body goes up untouched unless the model is aliased (the upstream knows it by another id).
Answers come back as they are, with the public model id put back when it was aliased. A streamed
answer is relayed line by line: a line split across network chunks waits for its end, and the
``done`` line gives the usage.
"""

from __future__ import annotations

import re

import msgspec
import orjson
from gateway.api import InvalidRequest
from gateway.api.canonical import Usage
from gateway.api.wire import MAX_FRAME_BYTES

from gateway_ollama import wire
from gateway_ollama.mapping import usage_of
from gateway_ollama.ndjson import LineSplitter

_MODEL_VALUE = re.compile(rb'"model"\s*:\s*"(?:[^"\\]|\\.)*"')


def forward_body(body: bytes, public_model: str, upstream_model: str) -> bytes:
    if upstream_model == public_model:
        return body
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:  # msgspec accepted it; orjson is stricter on huge ints
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    obj["model"] = upstream_model
    return orjson.dumps(obj)


def with_model(data: bytes, model: str) -> bytes:
    """The first top-level ``"model": "..."`` of one JSON object set to ``model`` (a quote inside a
    JSON string is always escaped, so the pattern only matches a real key; the top-level key comes
    first in every Ollama answer)."""
    replacement = b'"model":' + orjson.dumps(model)
    return _MODEL_VALUE.sub(lambda _: replacement, data, count=1)


def read_usage(body: bytes) -> Usage | None:
    """Usage of a whole answer; None when there is none (or no answer: the relay then decodes it
    through the adapter, which says what is wrong)."""
    try:
        view = wire.line_view_decoder.decode(body)
    except msgspec.MsgspecError:
        return None
    return usage_of(view.prompt_eval_count, view.eval_count)


class NdjsonFastStream:
    """Watches a same-format NDJSON stream: usage and end from the ``done`` line, model restored."""

    def __init__(self, public_model: str, *, max_line_bytes: int = MAX_FRAME_BYTES) -> None:
        self._public_model = public_model
        self._lines = LineSplitter(max_line_bytes)  # ``limits.stream_element_bytes``
        self._usage: Usage | None = None
        self._complete = False

    @property
    def usage(self) -> Usage | None:
        return self._usage

    @property
    def complete(self) -> bool:
        return self._complete

    def feed(self, chunk: bytes) -> bytes:
        return self._relay(self._lines.feed(chunk))

    def close(self) -> bytes:
        return self._relay(self._lines.close())

    def _relay(self, lines: list[bytes]) -> bytes:
        if not lines:
            return b""
        out: list[bytes] = []
        for line in lines:
            view = wire.line_view_decoder.decode(line)
            if view.model is not None and view.model != self._public_model:
                line = with_model(line, self._public_model)
            if view.done and view.error is None:
                self._complete = True
                self._usage = usage_of(view.prompt_eval_count, view.eval_count)
            out.append(line)
        out.append(b"")
        return b"\n".join(out)
