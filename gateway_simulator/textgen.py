"""Deterministic text, token and embedding generation for the upstream simulator.

Token model (used everywhere in the simulator):

* ``count_tokens(text)`` is the single prompt-side counter: ``max(words, ceil(chars / 4))`` where
  ``words`` is the number of whitespace-separated pieces.  Empty text counts 0.
* Generated output is a list of *pieces*; one piece is one output token.  The first piece is the
  ``[simulated]`` marker, every further piece is ``" " + word`` (the last word carries a final ``.``),
  so ``"".join(pieces)`` is the reply text and ``len(pieces)`` its completion token count.

Directives (searched in the last user message text):

* ``sim:tokens=N`` -> generate exactly N output tokens (pieces).
* ``sim:echo`` -> the reply is ``"[simulated] " + <last user text>`` verbatim.
"""

from __future__ import annotations

import array
import base64
import hashlib
import math
import random
import re
import sys
from dataclasses import dataclass
from typing import Any

MARKER = "[simulated]"
IMAGE_TOKENS = 85  # fixed cost of any image / document / audio / file part
WORDS: tuple[str, ...] = tuple(
    """alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa
    quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber azure basalt cedar cobalt coral
    ember fern flint garnet harbor indigo jasper lagoon maple marble meadow nectar onyx opal pebble quartz
    river saffron slate spruce summit thistle timber topaz tundra umber velvet willow zephyr model gateway
    token stream packet signal vector kernel buffer socket thread cache router proxy latency request
    reply upstream cluster shard replica quorum ledger beacon compass lantern""".split()
)
_WORD_RE = re.compile(r"\s*\S+")
_TOKENS_RE = re.compile(r"sim:tokens=(\d+)")
_ECHO_RE = re.compile(r"sim:echo\b")


def count_tokens(text: str) -> int:
    """Deterministic token estimate: the larger of word count and ``ceil(len(text) / 4)``."""
    if not text:
        return 0
    return max(len(text.split()), math.ceil(len(text) / 4))


def stable_hash(*parts: str) -> bytes:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.digest()


def seed_of(*parts: str) -> int:
    return int.from_bytes(stable_hash(*parts)[:8], "big")


def hex_id(*parts: str, n: int = 24) -> str:
    """Deterministic hex identifier derived from ``parts``."""
    return stable_hash(*parts).hex()[:n]


@dataclass(frozen=True)
class Directives:
    tokens: int | None = None
    echo: bool = False


def parse_directives(text: str) -> Directives:
    m = _TOKENS_RE.search(text or "")
    return Directives(tokens=int(m.group(1)) if m else None, echo=bool(_ECHO_RE.search(text or "")))


def natural_length(model: str, prompt: str) -> int:
    """Natural reply length in tokens (20..60) derived from the prompt hash."""
    return 20 + seed_of("len", model, prompt) % 41


def word_pieces(n: int, seed: int, marker: str = MARKER) -> list[str]:
    """``n`` pieces: the marker followed by ``n - 1`` pseudo-random words."""
    if n <= 0:
        return []
    rng = random.Random(seed)
    pieces = [marker] + [" " + rng.choice(WORDS) for _ in range(n - 1)]
    if n > 1:
        pieces[-1] += "."
    return pieces


def split_pieces(text: str) -> list[str]:
    """Split arbitrary text into pieces (leading whitespace kept with each word) for streaming."""
    pieces = _WORD_RE.findall(text)
    if not pieces:
        return [text] if text else []
    tail = text[len("".join(pieces)) :]
    if tail:
        pieces[-1] += tail
    return pieces


@dataclass
class Generated:
    pieces: list[str]
    finish: str  # "stop" | "length" | "stop_sequence"
    stop_sequence: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def tokens(self) -> int:
        return len(self.pieces)


def generate(
    model: str,
    prompt: str,
    last_user: str,
    *,
    max_tokens: int | None = None,
    stop: list[str] | None = None,
    default_tokens: int = 0,
) -> Generated:
    """Generate the deterministic reply for ``prompt`` honouring directives, max tokens and stops."""
    d = parse_directives(last_user)
    if d.echo:
        pieces = split_pieces(f"{MARKER} {last_user}")
    else:
        n = d.tokens if d.tokens is not None else (default_tokens or natural_length(model, prompt))
        pieces = word_pieces(n, seed_of("text", model, prompt))
    return finish_pieces(pieces, max_tokens=max_tokens, stop=stop)


def tool_echo(results: list[str], *, max_tokens: int | None = None,
              stop: list[str] | None = None) -> Generated:
    """The reply to a turn that hands back tool results: the results echoed, so a test can see
    which results reached the upstream (every vendor side answers tool rounds this way)."""
    return finish_pieces(split_pieces(f"{MARKER} tool said: {' | '.join(results)}"),
                         max_tokens=max_tokens, stop=stop)


def finish_pieces(
    pieces: list[str], *, max_tokens: int | None = None, stop: list[str] | None = None
) -> Generated:
    finish = "stop"
    if max_tokens is not None and len(pieces) > max(max_tokens, 0):
        pieces = pieces[: max(max_tokens, 0)]
        finish = "length"
    cut, seq = apply_stop(pieces, stop or [])
    if seq is not None:
        return Generated(cut, "stop_sequence", seq)
    return Generated(pieces, finish)


def apply_stop(pieces: list[str], stops: list[str]) -> tuple[list[str], str | None]:
    """Cut ``pieces`` at the earliest occurrence of any stop sequence (the sequence is excluded)."""
    text = "".join(pieces)
    best: tuple[int, str] | None = None
    for s in stops:
        if not s:
            continue
        i = text.find(s)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, s)
    if best is None:
        return pieces, None
    out: list[str] = []
    pos = 0
    for p in pieces:
        if pos + len(p) <= best[0]:
            out.append(p)
            pos += len(p)
            continue
        if best[0] > pos:
            out.append(p[: best[0] - pos])
        break
    return out, best[1]


def reasoning_pieces(model: str, prompt: str, budget: int | None = None) -> list[str]:
    """Simulated reasoning: 12..24 tokens, capped by ``budget`` when given."""
    n = 12 + seed_of("reasoning-len", model, prompt) % 13
    if budget is not None:
        n = max(1, min(n, budget))
    return word_pieces(n, seed_of("reasoning", model, prompt), marker="[simulated reasoning]")


def signature_for(thinking: str) -> str:
    """Deterministic base64 signature for a thinking block."""
    return base64.b64encode(hashlib.sha512(("sig:" + thinking).encode()).digest()).decode()


def _schema_type(schema: dict[str, Any]) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    return str(t or ("object" if "properties" in schema else "string")).lower()


def value_for_schema(schema: dict[str, Any]) -> Any:
    """Simulated value for a JSON-schema (or Gemini OpenAPI-style) node."""
    if not isinstance(schema, dict):
        return "sim"
    if schema.get("enum"):
        return schema["enum"][0]
    t = _schema_type(schema)
    if t == "string":
        return "sim"
    if t == "integer":
        return 1
    if t == "number":
        return 1
    if t == "boolean":
        return True
    if t == "array":
        return [value_for_schema(schema.get("items") or {})]
    if t == "object":
        return args_for_schema(schema)
    return None


def args_for_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """Tool-call arguments: every declared property gets a value; ``required`` names are always present."""
    if not isinstance(schema, dict):
        return {}
    props = schema.get("properties") or {}
    out = {name: value_for_schema(sub) for name, sub in props.items()}
    for name in schema.get("required") or []:
        out.setdefault(name, "sim")
    return out


def embedding_dims(model: str) -> int:
    m = model.lower()
    if "1024" in m:
        return 1024
    if "768" in m or "text-embedding-004" in m or "gemini-embedding" in m:
        return 768
    if "3-large" in m or "large" in m:
        return 3072
    return 1536


def embed(text: str, dims: int) -> list[float]:
    """Deterministic unit-norm vector of ``dims`` floats from a hash of ``text``."""
    raw = hashlib.shake_256(("emb:" + text).encode("utf-8", "surrogatepass")).digest(dims * 2)
    ints = array.array("h", raw)
    if sys.byteorder != "little":
        ints.byteswap()
    vec = [v / 32768.0 for v in ints]
    return normalise(vec)


def normalise(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def floats_to_base64(vec: list[float]) -> str:
    arr = array.array("f", vec)
    if sys.byteorder != "little":
        arr.byteswap()
    return base64.b64encode(arr.tobytes()).decode()
