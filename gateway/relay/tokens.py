"""Offline token counts: upper bounds that size reservations, and estimates billed when an
upstream reports no usage.

No tokenizer can be downloaded at run time. Two different questions get two different answers:

* ``*_bound``: how many tokens the input can possibly be, for a reservation. Every token of the
  common tokenizers (byte-level BPE: OpenAI's and Anthropic's; SentencePiece with byte fallback:
  Gemini's, Llama's) covers at least one UTF-8 byte, so the UTF-8 length of the text is an upper
  bound whatever the script: CJK, emoji, runs of one character, code, digits. A reservation is
  the worst case; the charge is what the upstream reports (docs/money.md).
* ``estimate_*``: a realistic figure for a bill when the upstream reports nothing: one token per
  word or punctuation mark, or per four ASCII characters, whichever is more, plus one per
  non-ASCII character (about what BPE vocabularies give CJK). Estimates are flagged
  (``Usage.estimated``) wherever they reach a bill.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gateway.relay.canonical import (
    ChatRequest,
    DocumentPart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)
IMAGE_TOKENS = 1_600  # a generous flat figure for one image of any size
DOCUMENT_PAGE_TOKENS = 3_000
MESSAGE_OVERHEAD = 4


def estimate_text_tokens(text: str) -> int:
    if not text:
        return 0
    if text.isascii():
        return max(_count_pieces(text), (len(text) + 3) // 4)
    wide = sum(1 for ch in text if ord(ch) > 0x7F)
    return max(_count_pieces(text), (len(text) - wide + 3) // 4 + wide)


_SLICE = 64 * 1024
_NON_WORD = re.compile(r"\W")


def _count_pieces(text: str) -> int:
    """``len(_PIECES.findall(text))`` a slice at a time, each cut at a non-word character so no
    piece is split: memory stays bounded (not a list of millions of strings), and a worker thread
    counting a huge text lets the GIL go between slices (``gateway.relay.offload``)."""
    if len(text) <= _SLICE:
        return len(_PIECES.findall(text))
    count = start = 0
    while start < len(text):
        end = start + _SLICE
        if end < len(text):
            cut = _NON_WORD.search(text, end)
            end = cut.start() if cut is not None else len(text)
        count += len(_PIECES.findall(text, start, end))
        start = end
    return count


def text_token_bound(text: str) -> int:
    """At most this many tokens, for any common tokenizer: the UTF-8 length."""
    if text.isascii():  # O(1) in CPython
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _part_tokens(part: Part, text: Callable[[str], int] = estimate_text_tokens) -> int:
    if isinstance(part, TextPart):
        return text(part.text)
    if isinstance(part, ImagePart):
        return IMAGE_TOKENS
    if isinstance(part, DocumentPart):
        return text(part.text) if part.text else DOCUMENT_PAGE_TOKENS
    if isinstance(part, ToolCallPart):
        return text(part.name) + text(part.arguments)
    if isinstance(part, ToolResultPart):
        return sum(_part_tokens(p, text) for p in part.content) + MESSAGE_OVERHEAD
    if isinstance(part, ThinkingPart):
        return text(part.text)
    return 0


def estimate_parts_tokens(parts: list[Part]) -> int:
    return sum(_part_tokens(p) for p in parts)


def _request_tokens(request: ChatRequest, text: Callable[[str], int]) -> int:
    total = sum(text(p.text) for p in request.system)
    for message in request.messages:
        total += MESSAGE_OVERHEAD + sum(_part_tokens(p, text) for p in message.parts)
    for tool in request.tools:
        total += text(tool.name) + text(tool.description or "")
        total += text(str(tool.parameters))
    return total


def estimate_request_tokens(request: ChatRequest) -> int:
    """Prompt tokens of a canonical request (system, messages, tool declarations): an estimate."""
    return _request_tokens(request, estimate_text_tokens)


def request_token_bound(request: ChatRequest) -> int:
    """Prompt tokens of a canonical request, at most (for its reservation)."""
    return _request_tokens(request, text_token_bound)


# Inline media in the three families: base64 after a data URL prefix (``...;base64,``) or as the
# value of a ``"data"`` field (message-protocol ``source``, v1beta ``inlineData``, chat ``input_audio``).
_MEDIA_RUN = 4096
_MEDIA = re.compile(rb'(?:;base64,|"data"\s*:\s*")[A-Za-z0-9+/=]{%d,}' % _MEDIA_RUN)


def estimate_body_tokens(body: bytes) -> int:
    """A rough estimate from raw JSON bytes (a third of them; inline media as ``body_token_bound``
    counts it). Not a bound: reservations use ``body_token_bound``."""
    return max(body_token_bound(body) // 3, 1)


def body_token_bound(body: bytes) -> int:
    """At most this many prompt tokens in a JSON request body, for the fast path that does not
    translate the prompt: its UTF-8 length (JSON syntax and escapes only add bytes), except that
    inline base64 media (4096+ base64 characters right after a data URL prefix or a ``"data"``
    key) counts as one image each. Any other long run (a hash, a run of one letter) is text and
    counts in full. (Bodies without either marker, nearly all, are not scanned at all.)"""
    total = len(body)
    if total >= _MEDIA_RUN and (b";base64," in body or b'"data"' in body):
        for match in _MEDIA.finditer(body):
            total -= len(match[0]) - IMAGE_TOKENS
    return max(total, 1)
