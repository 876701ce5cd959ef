"""Storage backends behind one interface (``base.Storage``), chosen by the database URL.

``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite:///:memory:``
(optional ``?synchronous=FULL``) or ``postgresql://user@host:port/db`` (also ``postgres://``;
optional ``pool_min``/``pool_max`` query parameters, anything else goes to asyncpg).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from gateway.storage.base import Storage
from gateway.storage.sqlite import SqliteStorage
from gateway.storage.urls import POSTGRES_PREFIXES, SQLITE_PREFIX

__all__ = ["Storage", "open_storage"]


def open_storage(database_url: str) -> Storage:
    """The backend for ``database_url``, not yet connected: ``await storage.open()`` connects and
    applies pending migrations, ``await storage.close()`` ends it."""
    if database_url.startswith(SQLITE_PREFIX):
        path, _, query = database_url[len(SQLITE_PREFIX):].partition("?")
        if not path:
            raise ValueError("sqlite URL without a path: use sqlite:///path/to/file.db")
        options = dict(parse_qsl(query))
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise ValueError(f"unknown sqlite URL options: {', '.join(sorted(unknown))}")
        return SqliteStorage(path, synchronous=options.get("synchronous", "NORMAL"))
    if database_url.startswith(POSTGRES_PREFIXES):
        from gateway.storage.postgres import PostgresStorage

        return PostgresStorage(database_url)
    raise ValueError(f"unsupported database URL {database_url.split(':', 1)[0]!r}: "
                     "use sqlite:///path or postgresql://user@host/db")
