"""``read_usage`` of a large answer reads ``usage`` from the tail when it is the top-level object's
last member, and otherwise decodes the whole answer: the two ways always agree."""

from __future__ import annotations

import orjson

from gateway.relay.canonical import Usage
from translators.chat.fastpath import read_usage

VECTORS = [{"object": "embedding", "index": i, "embedding": [0.5] * 400} for i in range(20)]
USAGE = {"prompt_tokens": 7, "total_tokens": 7}


def test_usage_last_is_read_from_the_tail() -> None:
    body = orjson.dumps({"object": "list", "data": VECTORS, "model": "m", "usage": USAGE})
    assert len(body) > 4096
    assert read_usage(body) == Usage(input_tokens=7, output_tokens=0)


def test_usage_first_nested_or_quoted_falls_back_to_the_whole_answer() -> None:
    first = orjson.dumps({"usage": USAGE, "object": "list", "data": VECTORS})
    assert read_usage(first) == Usage(input_tokens=7, output_tokens=0)
    nested = orjson.dumps({"usage": USAGE, "data": VECTORS, "meta": {"usage": {"prompt_tokens": 999}}})
    assert read_usage(nested) == Usage(input_tokens=7, output_tokens=0)
    quoted = orjson.dumps({"usage": USAGE, "data": VECTORS, "note": '"usage":{"prompt_tokens":999}}'})
    assert read_usage(quoted) == Usage(input_tokens=7, output_tokens=0)
    none = orjson.dumps({"data": VECTORS})
    assert read_usage(none) is None
