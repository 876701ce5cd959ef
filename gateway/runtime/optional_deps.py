"""The optional extras of the package, and the one line that names a missing one.

The default (`pip install model-gateway`: granian, SQLite) needs none of them. A config that asks
for asyncpg or redis when it is not installed is refused before anything starts, with the pip line
that installs it, instead of an ImportError traceback from deep inside a worker; both are imported
only where they are used (gateway/storage/postgres.py, gateway/accounts/auth.py,
gateway/accounts/ratelimit.py; OpenTelemetry in plugins/telemetry/spans.py). The servers' extras
are checked by gateway/server/servers.py (``not_installed``).
"""

from __future__ import annotations

import importlib.util
from typing import NamedTuple

from gateway.settings.schema import Config
from gateway.storage.urls import POSTGRES_PREFIXES


class Extra(NamedTuple):
    module: str  # what the gateway imports
    extra: str  # the package extra that installs it
    what: str  # what the operator is told it is


POSTGRES = Extra("asyncpg", "postgres", "the PostgreSQL driver")
REDIS = Extra("redis", "redis", "the Redis client")
OTEL = Extra("opentelemetry.exporter.otlp.proto.http", "otel", "the OpenTelemetry SDK and its OTLP exporter")


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (asyncpg and redis take tens of
    milliseconds to import, and a config check runs in every worker)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module blocked in sys.modules
        return False


def _needs(asked_by: str, extra: Extra) -> str:
    return f"{asked_by} needs {extra.what}: pip install 'model-gateway[{extra.extra}]'"


def missing_extra_errors(config: Config) -> list[str]:
    """One config error line per extra the config asks for that is not installed."""
    errors: list[str] = []
    if config.database.startswith(POSTGRES_PREFIXES) and not installed(POSTGRES.module):
        scheme = config.database.split(":", 1)[0]
        errors.append(_needs(f"database: {scheme}://", POSTGRES))
    if config.redis is not None and not installed(REDIS.module):
        errors.append(_needs("redis:", REDIS))
    if config.telemetry.otlp_endpoint is not None and not installed(OTEL.module):
        errors.append(_needs("telemetry.otlp_endpoint", OTEL))
    return errors

