"""Reading ``GET /metrics`` in tests: prometheus_client's own parser of the text format (it refuses
a malformed line), so that a test names a series by its labels, in any order."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Series = tuple[str, frozenset[tuple[str, str]]]


def parse(text: str) -> dict[Series, float]:
    """Every sample: (name, its labels) -> value."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def series(name: str, **labels: str) -> Series:
    return name, frozenset(labels.items())


def value(text: str, name: str, **labels: str) -> float:
    found = parse(text)
    key = series(name, **labels)
    assert key in found, f"no sample {name}{labels} in /metrics"
    return found[key]
