"""The YAML config file, decoded into the Structs of ``gateway.settings.schema`` (re-exported here);
every error names its key path.

``${VAR}`` and ``${VAR:-default}`` are replaced in string values (never in keys) before decoding,
so a secret coming from the environment is never written into the file. The rules beyond the
types (unique ids, references between sections, protocols and URL styles) are
``gateway.settings.checks``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import msgspec
import yaml

from gateway.runtime.optional_deps import missing_extra_errors
from gateway.settings.checks import protocol_errors, semantic_errors
from gateway.settings.decode import join as _join
from gateway.settings.decode import read_yaml, struct_fields, value_errors
from gateway.settings.routes_check import in_catalogue
from gateway.settings.schema import (
    BillingConfig,
    BootstrapConfig,
    Config,
    GroupConfig,
    LimitsConfig,
    Listen,
    LoggingConfig,
    LogsConfig,
    MeteringConfig,
    ModelConfig,
    Price,
    RateLimitConfig,
    RoutingConfig,
    SimulatorConfig,
    TasksConfig,
    UpstreamConfig,
    UpstreamTimeouts,
)

__all__ = ["DATABASE_KEYS", "SIMULATOR_BASE_URL", "BillingConfig", "BootstrapConfig", "Config",
           "ConfigError", "GroupConfig", "LimitsConfig", "Listen", "LoggingConfig", "LogsConfig",
           "MeteringConfig", "ModelConfig", "Price", "RateLimitConfig", "RoutingConfig", "SimulatorConfig",
           "TasksConfig", "UpstreamConfig", "UpstreamTimeouts", "check_protocols", "load_config",
           "load_serving_config", "parse_config", "serves_a_model", "simulator_url"]


class ConfigError(Exception):
    """One or more config problems, each line ``key.path: what is wrong``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


# What the database commands of the CLI (users, keys, top-up, audit) read: an unset ``${VAR}``
# anywhere else (an upstream's secret, the admin key) is no error for them; only ``serve`` needs it.
DATABASE_KEYS = frozenset({"database", "redis"})


def _interpolate(value: Any, path: str, errors: list[str] | None) -> Any:
    """``errors`` None: an unset variable without a default becomes "" silently."""
    if isinstance(value, str):
        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in os.environ:
                return os.environ[name]
            if default is not None:
                return default
            if errors is not None:
                errors.append(f"{path or '$'}: environment variable {name} is not set")
            return ""
        return _VAR.sub(replace, value)
    if isinstance(value, dict):
        return {k: _interpolate(v, _join(path, str(k)), errors) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    return value


def _interpolate_top(raw: dict[Any, Any], errors: list[str], env_needed_by: Collection[str] | None) -> Any:
    def needed(key: Any) -> bool:
        return env_needed_by is None or key in env_needed_by

    return {key: _interpolate(value, str(key), errors if needed(key) else None) for key, value in raw.items()}


def _decode_sections(raw: dict[Any, Any], errors: list[str]) -> tuple[dict[str, Any], set[str]]:
    """What of ``raw`` decodes, and the key paths that do not (their problems added to ``errors``,
    every one of them: ``gateway.settings.decode``). A section that fails is left to its default and
    a failed item of ``models`` or ``upstreams`` replaced by a stand-in (so later items keep their
    index), so that the rules beyond the types still run on the rest of the file."""
    fields = {f.name: f.type for f in struct_fields(Config)}
    good: dict[str, Any] = {}
    failed: set[str] = set()
    for key, value in raw.items():
        if key not in fields:
            errors.append(f"{key}: unknown key")
            continue
        problems = value_errors(value, fields[key], key)
        errors += problems
        if not problems:
            good[key] = value
        elif key in _STAND_INS and isinstance(value, list):
            item_type, stand_in = _STAND_INS[key]
            good[key] = []
            for i, item in enumerate(value):
                if value_errors(item, item_type, ""):
                    failed.add(f"{key}[{i}]")
                    item = stand_in(i, item)
                good[key].append(item)
        else:
            failed.add(key)
    return good, failed


def _model_stand_in(i: int, item: Any) -> dict[str, Any]:
    model_id = item.get("id") if isinstance(item, dict) else None  # upstreams may still refer to it
    return {"id": model_id if isinstance(model_id, str) else f"<models[{i}]>"}


def _upstream_stand_in(i: int, item: Any) -> dict[str, Any]:
    return {"name": f"<upstreams[{i}]>", "protocol": "", "base_url": "http://stand-in.invalid"}


_STAND_INS: dict[str, tuple[type[msgspec.Struct], Callable[[int, Any], dict[str, Any]]]] = {
    "models": (ModelConfig, _model_stand_in), "upstreams": (UpstreamConfig, _upstream_stand_in)}


def _under(line: str, paths: Collection[str]) -> bool:
    """True when the problem ``line`` is about one of ``paths`` (or something inside it)."""
    where = line.split(":", 1)[0]
    return any(where == p or where.startswith((p + ".", p + "[")) for p in paths)


# ``base_url: simulator``: the simulator of this config (``simulator.host``/``port``), so that its
# port is written once and the upstreams follow it.
SIMULATOR_BASE_URL = "simulator"


def simulator_url(sim: SimulatorConfig) -> str:
    """Where the configured simulator answers (a wildcard listen address is reached on loopback)."""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(sim.host, sim.host)
    return f"http://[{host}]:{sim.port}" if ":" in host else f"http://{host}:{sim.port}"


def _resolve_simulator(config: Config) -> None:
    for up in config.upstreams:
        if up.base_url == SIMULATOR_BASE_URL:
            up.base_url = simulator_url(config.simulator)



def check_protocols(config: Config, known: Collection[str]) -> None:
    """ConfigError unless every upstream's protocol is one of ``known`` (the adapters' protocols)."""
    errors = protocol_errors(config, known)
    if errors:
        raise ConfigError(errors)


def parse_config(text: str, protocols: Collection[str] | None = None, *,
                 env_needed_by: Collection[str] | None = None, serving: bool = False,
                 model_required: bool = True) -> Config:
    """Decode config text; raises ConfigError listing every problem found. With ``protocols`` (the
    protocols of the registered adapters) an upstream's unknown protocol is one of them. With
    ``env_needed_by`` (top-level keys, e.g. ``DATABASE_KEYS``) only the ``${VAR}``s under those
    keys must be set; the others are read as "" when unset. ``serving``: the text is what a
    gateway will serve, so it must not be empty and (``model_required``) must serve some model."""
    try:
        raw, errors = read_yaml(text)  # errors: its duplicated keys
    except yaml.YAMLError as exc:
        raise ConfigError([f"$: not valid YAML: {exc}"]) from exc
    if raw is None and serving:
        raise ConfigError(["$: the file is empty: a config needs at least models and upstreams"])
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(["$: the config must be a mapping"])
    unset: list[str] = []  # ${VAR}s without a value: what they stood in is not checked further
    raw = _interpolate_top(raw, unset, env_needed_by)
    errors += unset
    good, failed = _decode_sections(raw, errors)
    failed |= {line.split(":", 1)[0] for line in unset}
    config = msgspec.convert(good, Config, strict=False)
    _resolve_simulator(config)
    # missing_extra_errors: postgresql:// or redis: without their extra installed
    rules = semantic_errors(config) + missing_extra_errors(config)
    if protocols is not None:
        rules += protocol_errors(config, protocols)
    unsure = any(_under(path, ("models", "upstreams")) for path in failed)  # what they would serve
    if serving and model_required and not unsure and not serves_a_model(config):
        rules.append("models: the config serves no model: list models and an upstream that serves them "
                     "(upstreams[].models)")
    errors += [line for line in rules if not _under(line, failed)]  # not about what failed to decode
    if errors:
        raise ConfigError(errors)
    return config


def load_serving_config(path: str | Path, protocols: Collection[str] | None = None, *,
                        model_required: bool = True) -> Config:
    """The config a gateway serves from the file at ``path``, or ConfigError listing every problem
    of the file, one line each: those of ``load_config``, an empty file, and (``model_required``)
    a catalogue that no upstream serves. ``check-config``, ``gateway serve`` and a reload read a
    file through this; serve starts without a model (an admin-only gateway) with a warning."""
    return parse_config(_read_text(path), protocols, serving=True, model_required=model_required)


def serves_a_model(config: Config) -> bool:
    """True when some model of the catalogue has an upstream (an id it lists may be priced by a
    pattern entry: ``vendor/*``)."""
    catalogue = config.models_by_id
    return any(in_catalogue(catalogue, public) for up in config.upstreams for public in up.model_map())


def _read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"$: cannot read {path}: {exc.strerror}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError([f"$: {path} is not UTF-8 text (byte {exc.start})"]) from exc


def load_config(path: str | Path, protocols: Collection[str] | None = None, *,
                env_needed_by: Collection[str] | None = None) -> Config:
    return parse_config(_read_text(path), protocols, env_needed_by=env_needed_by)
