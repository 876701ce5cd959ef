"""Model ids and wildcard patterns (CONTRACT 7): one rule of matching for the catalogue, routing,
groups' model lists, keys' allowlists and the config's checks.

A pattern is an id that ends in ``*`` (``vendor/*``, ``gpt-*``) and holds no other ``*``: it stands
for every id that starts with the part before the star and goes on after it. Lookups are exact
first; among the patterns that match, the longest prefix wins. An upstream's pattern entry sends
the remainder (the part the star stood for) as the upstream's model id, after the prefix of its
own side in the map form (``{"oai/*": "openai/*"}``; the list form's upstream side is ``*``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

WILDCARD = "*"
V = TypeVar("V")


def is_pattern(model_id: str) -> bool:
    return model_id.endswith(WILDCARD)


def pattern_problem(model_id: str) -> str | None:
    """Why ``model_id`` is no valid id or pattern (for the config's checks), or None."""
    if WILDCARD in model_id[:-1]:
        return f"{model_id!r}: a wildcard `*` may only end a model id"
    if model_id == WILDCARD:
        return f"{model_id!r}: a wildcard needs a prefix before its `*` (e.g. 'vendor/*')"
    if not model_id.strip():
        return "a model id must not be empty"
    return None


def prefix_of(pattern: str) -> str:
    return pattern[:-1]


def covers(pattern: str, model_id: str) -> bool:
    """True when the pattern ``pattern`` stands for ``model_id`` (a concrete id, or a narrower
    pattern: ``vendor/*`` covers ``vendor/x/*``)."""
    prefix = prefix_of(pattern)
    return is_pattern(pattern) and model_id.startswith(prefix) and len(model_id) > len(prefix)


class ModelTable(Generic[V]):
    """Values by model id: exact ids, then patterns by longest prefix (``lookup``)."""

    __slots__ = ("_exact", "_patterns")

    def __init__(self, entries: Mapping[str, V]) -> None:
        self._exact = {k: v for k, v in entries.items() if not is_pattern(k)}
        # Longest prefix first: the first that matches wins.
        self._patterns = sorted(((prefix_of(k), k, v) for k, v in entries.items() if is_pattern(k)),
                                key=lambda item: len(item[0]), reverse=True)

    def lookup(self, model_id: str) -> tuple[str, V] | None:
        """(the entry's own id or pattern, its value) for ``model_id``, or None."""
        found = self._exact.get(model_id)
        if found is not None:
            return model_id, found
        if is_pattern(model_id):  # a pattern is no model id a client may call
            return None
        for prefix, pattern, value in self._patterns:
            if model_id.startswith(prefix) and len(model_id) > len(prefix):
                return pattern, value
        return None

    def get(self, model_id: str) -> V | None:
        found = self.lookup(model_id)
        return None if found is None else found[1]

    def __contains__(self, model_id: str) -> bool:
        return self.lookup(model_id) is not None

    def concrete(self) -> Iterable[str]:
        """The exact ids, in the order given."""
        return self._exact.keys()


def listed(allowed: Iterable[str], model_id: str) -> bool:
    """True when a list of ids and patterns (a key's allowlist, a group's models) names
    ``model_id``, itself or by a pattern that covers it."""
    return any(entry == model_id or covers(entry, model_id) for entry in allowed)


def upstream_id(public_pattern: str, upstream_side: str, model_id: str) -> str:
    """The id an upstream is asked for when ``model_id`` routes through its entry
    ``public_pattern: upstream_side``: the remainder after the pattern's prefix, after the upstream
    side's own prefix (``*`` alone: the remainder itself)."""
    if not is_pattern(upstream_side):  # refused by the config's checks
        return upstream_side
    return prefix_of(upstream_side) + model_id[len(prefix_of(public_pattern)):]
