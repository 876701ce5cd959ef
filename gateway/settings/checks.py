"""The config's rules beyond its types (``gateway.settings.config`` decodes, this checks): unique ids, URLs,
references between sections, addresses, and each upstream's protocol and URL style against the
registered adapters. Every problem is one line naming its key path."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from gateway.runtime.secrets_scrub import redact_url
from gateway.settings.decode import struct_fields
from gateway.settings.model_ids import is_pattern, pattern_problem
from gateway.settings.routes_check import fallback_errors, in_catalogue, upstream_model_errors
from gateway.settings.schema import Config, UpstreamConfig

# An entry made of digits, dots, colons and a slash is meant as an address: one that does not parse
# (``10.0.0.0/33``) must not silently become a host name that nothing matches.
_LOOKS_NUMERIC = re.compile(r"[0-9.]+|.*[:/].*")  # a host name has neither ':' nor '/'


def breaks_header_line(text: str) -> bool:
    """True when ``text``, as a header's value, would end its line early (header injection)."""
    return any(c in text for c in "\r\n\0")


def _is_network(entry: str) -> bool:
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False
    return True


def semantic_errors(config: Config) -> list[str]:
    """One line per rule of the decoded config that its types alone do not enforce."""
    errors: list[str] = []
    for i, entry in enumerate(config.tasks.callback_allowlist):
        if _LOOKS_NUMERIC.fullmatch(entry.strip()) and not _is_network(entry.strip()):
            errors.append(f"tasks.callback_allowlist[{i}]: {entry!r} is not a valid IP address or CIDR")
    model_ids: set[str] = set()
    for i, model in enumerate(config.models):
        if model.id in model_ids:
            errors.append(f"models[{i}].id: duplicate model id {model.id!r}")
        model_ids.add(model.id)
        if problem := pattern_problem(model.id):
            errors.append(f"models[{i}].id: {problem}")
        for price_field in struct_fields(type(model.price)):
            value = getattr(model.price, price_field.name)
            if value is not None and value < 0:
                errors.append(f"models[{i}].price.{price_field.name}: must not be negative")
    names: set[str] = set()
    for i, up in enumerate(config.upstreams):
        where = f"upstreams[{i}]"
        shown = redact_url(up.base_url)  # an error line may be pasted anywhere: no credentials
        if up.name in names:
            errors.append(f"{where}.name: duplicate upstream name {up.name!r}")
        names.add(up.name)
        try:
            parts = urlsplit(up.base_url)
        except ValueError:  # a stray bracket: no URL at all
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.netloc:
            errors.append(f"{where}.base_url: must be an http(s) URL, got {shown!r}")
        if parts.query or parts.fragment:
            errors.append(f"{where}.base_url: must not have a query or fragment, got {shown!r}")
        if up.weight < 1:
            errors.append(f"{where}.weight: must be at least 1")
        if breaks_header_line(up.api_key):  # a key read from a file with its newline, say
            errors.append(f"{where}.api_key: holds a line break or NUL, which no HTTP header may carry")
        for header, value in up.headers.items():
            if not _HEADER_NAME.fullmatch(header) or breaks_header_line(value):
                errors.append(f"{where}.headers.{header}: not a valid HTTP header name and value")
        errors += upstream_model_errors(where, up, model_ids)
    for name, group in config.groups.items():
        if group.ratio < 0:
            errors.append(f"groups.{name}.ratio: must not be negative")
        for model_id in group.models or []:
            if not in_catalogue(model_ids, model_id):
                errors.append(f"groups.{name}.models: {model_id!r} is not in the models catalogue")
    errors += fallback_errors(config)
    if "default" not in config.groups:
        errors.append("groups: a 'default' group is required")
    for i, entry in enumerate(config.trusted_proxies):
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            errors.append(f"trusted_proxies[{i}]: not an IP or CIDR: {entry!r}")
    if not (config.database.startswith("sqlite:///") or config.database.startswith(("postgresql://",
                                                                                      "postgres://"))):
        errors.append("database: must start with sqlite:/// or postgresql://")
    if config.redis is not None and not config.redis.startswith(("redis://", "rediss://", "unix://")):
        errors.append("redis: must be a redis:// URL or null")
    metering = config.metering
    if metering.heartbeat_s <= 0 or metering.stale_after_s < 2 * metering.heartbeat_s:
        errors.append("metering.stale_after_s: must be at least twice metering.heartbeat_s (both positive)")
    if metering.batch_max < 1 or metering.flush_interval_s < 0:
        errors.append("metering.batch_max: must be at least 1 (and flush_interval_s not negative)")
    if config.billing.rmb_per_usd <= 0:
        errors.append("billing.rmb_per_usd: must be positive")
    if (endpoint := config.telemetry.otlp_endpoint) is not None:
        try:
            parts = urlsplit(endpoint)
        except ValueError:  # a stray bracket: no URL at all
            parts = urlsplit("")
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            errors.append(f"telemetry.otlp_endpoint: must be the collector's http(s) base URL "
                          f"(http://host:4318), got {redact_url(endpoint)!r}")
    return errors


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def protocol_errors(config: Config, known: Collection[str]) -> list[str]:
    """One line per upstream whose ``protocol`` no registered adapter speaks. When ``known`` maps
    protocols to their adapters, an upstream's ``style`` must be one its adapter declares
    (``url_styles``), and the style may check the upstream's other keys (``check``)."""
    listed = ", ".join(sorted(known)) or "none"
    errors: list[str] = []
    for i, up in enumerate(config.upstreams):
        if up.protocol not in known:
            errors.append(f"upstreams[{i}].protocol: unknown protocol {up.protocol!r} (known: {listed})")
        elif isinstance(known, Mapping):
            errors += _style_errors(f"upstreams[{i}]", up, known[up.protocol])
            capabilities: frozenset[str] = getattr(known[up.protocol], "capabilities", frozenset())
            patterns = [public for public in up.model_map() if is_pattern(public)]
            if patterns and not capabilities & {"generate", "embed"}:  # a task is priced by a model id
                errors.append(f"upstreams[{i}].models: {patterns[0]!r}: wildcard routes serve text models "
                              f"only, not protocol {up.protocol!r}")
    return errors


def _style_errors(where: str, up: UpstreamConfig, adapter: object) -> list[str]:
    styles: Mapping[str, Any] = getattr(adapter, "url_styles", {})
    if up.style == "standard":
        return [] if up.api_version is None else [
            f"{where}.api_version: only used by a style that needs one (e.g. style: azure)"]
    if up.style not in styles:
        known = ", ".join(["standard", *sorted(styles)])
        return [f"{where}.style: unknown style {up.style!r} for protocol {up.protocol!r} (known: {known})"]
    check = getattr(styles[up.style], "check", None)
    problems: list[str] = check(up) if check is not None else []
    return [f"{where}.{problem}" for problem in problems]
