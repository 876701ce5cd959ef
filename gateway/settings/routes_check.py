"""The config's rules about model ids between sections (``gateway.settings.checks`` calls them):
wildcard patterns in upstreams' model lists and groups, and ``models[].fallbacks``.

A fallback's own fallbacks are never followed (``gateway.relay.fallback``), so a cycle
(``a -> b -> a``) is harmless and allowed; what is refused is a fallback that cannot serve: a
pattern, the model itself, an id twice, an id the catalogue does not price, an id no upstream
lists."""

from __future__ import annotations

from collections.abc import Collection

from gateway.settings.model_ids import ModelTable, covers, is_pattern, pattern_problem
from gateway.settings.schema import Config, UpstreamConfig


def in_catalogue(model_ids: Collection[str], model_id: str) -> bool:
    """True when the catalogue prices ``model_id`` (an id or a pattern): an entry of its own, or a
    pattern entry that covers it."""
    return model_id in model_ids or any(covers(entry, model_id) for entry in model_ids if is_pattern(entry))


def upstream_model_errors(where: str, up: UpstreamConfig, model_ids: Collection[str]) -> list[str]:
    """One line per entry of ``up.models`` that is no valid id or pattern, that the catalogue does
    not price, or whose upstream side does not fit (a pattern maps to a pattern: ``"oai/*":
    "openai/*"``; an id to an id)."""
    errors: list[str] = []
    for public, private in up.model_map().items():
        if problem := pattern_problem(public):
            errors.append(f"{where}.models: {problem}")
            continue
        if not in_catalogue(model_ids, public):
            errors.append(f"{where}.models: {public!r} is not in the models catalogue")
        if is_pattern(public) and (not is_pattern(private) or "*" in private[:-1]):
            errors.append(f"{where}.models.{public}: the upstream side of a pattern must end in its only `*` "
                          f"(e.g. '*' or 'openai/*'), got {private!r}")
        elif not is_pattern(public) and "*" in private:
            errors.append(f"{where}.models.{public}: {private!r}: only a pattern maps to an id with `*`")
    return errors


def fallback_errors(config: Config) -> list[str]:
    """One line per ``models[].fallbacks`` entry that could never serve."""
    errors: list[str] = []
    catalogue = ModelTable({m.id: m for m in config.models})
    routed = ModelTable({public: True for up in config.upstreams for public in up.model_map()})
    for i, model in enumerate(config.models):
        seen: set[str] = set()
        for j, fallback in enumerate(model.fallbacks):
            where = f"models[{i}].fallbacks[{j}]"
            if is_pattern(fallback):
                errors.append(f"{where}: {fallback!r} is a pattern; a fallback is one model id")
            elif fallback == model.id:
                errors.append(f"{where}: a model cannot fall back to itself")
            elif fallback in seen:
                errors.append(f"{where}: {fallback!r} is listed twice")
            elif fallback not in catalogue:
                errors.append(f"{where}: {fallback!r} is not in the models catalogue")
            elif fallback not in routed:
                errors.append(f"{where}: no upstream serves {fallback!r} (upstreams[].models)")
            seen.add(fallback)
    return errors
