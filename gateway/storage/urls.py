"""Which backend a database URL names (``database:`` in the config): the one place its schemes are
spelled, for ``open_storage`` and for what checks a URL before any backend is imported (the
optional extras, start-up)."""

from __future__ import annotations

SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")
