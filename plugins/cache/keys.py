"""What names an entry of the response cache, and what a request says about the cache.

An entry's key is the sha256 of the user id, the model asked for, the client's family and the
body in canonical form: its JSON with object members sorted and the fields that only choose how
the answer is delivered (``stream``, ``stream_options``) left out. So the same request streamed
or not finds one entry, and no two users ever share one: the user is part of the name, and a
kept entry also names its user, checked again on every hit.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

# Fields of a body that change how the answer is delivered, not what it says.
DELIVERY_FIELDS = ("stream", "stream_options")
# Fields asking for what the kept (canonical) answer does not hold: token log-probabilities. Such a
# request is not served by the cache at all (chat ``logprobs``/``top_logprobs``, legacy
# completions ``logprobs``, v1beta ``generationConfig.responseLogprobs``).
_UNKEPT_FIELDS = ("logprobs", "top_logprobs")
_UNKEPT_GENERATION_FIELDS = ("responseLogprobs", "logprobs")
_SORTED = msgspec.json.Encoder(order="sorted")


def canonical_body(body: bytes) -> bytes | None:
    """``body`` as canonical JSON without its delivery fields (the body was read by the family's
    own peek already, so it is JSON); None for a request whose answer the cache cannot keep."""
    document: Any = msgspec.json.decode(body)
    if isinstance(document, dict):
        if any(document.get(name) for name in _UNKEPT_FIELDS):
            return None
        generation = document.get("generationConfig")
        if isinstance(generation, dict) and any(generation.get(n) for n in _UNKEPT_GENERATION_FIELDS):
            return None
        for name in DELIVERY_FIELDS:
            document.pop(name, None)
    return _SORTED.encode(document)


def entry_key(user_id: int, model: str, family: str, body: bytes) -> str | None:
    """The entry's name, or None when the cache does not serve this request."""
    canonical = canonical_body(body)
    if canonical is None:
        return None
    digest = hashlib.sha256(f"{user_id}\x00{model}\x00{family}\x00".encode())
    digest.update(canonical)
    return digest.hexdigest()


class Directives(msgspec.Struct, frozen=True):
    """What a request's ``Cache-Control`` asks of the cache."""

    answer_from_cache: bool = True  # False under no-cache or no-store
    keep_answer: bool = True  # False under no-store


def directives(cache_control: str | None) -> Directives:
    if not cache_control:
        return Directives()
    tokens = {part.split("=", 1)[0].strip().lower() for part in cache_control.split(",")}
    if "no-store" in tokens:
        return Directives(answer_from_cache=False, keep_answer=False)
    if "no-cache" in tokens:  # go to the upstream, and keep its (fresher) answer
        return Directives(answer_from_cache=False)
    return Directives()
