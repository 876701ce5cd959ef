"""Versioned schema migrations: ``NNNN_name.sql`` files in this package, applied in order at open.

Files are dialect-neutral SQL; ``{pk}`` stands for the dialect's auto-increment primary key and
``{without_rowid}`` for SQLite's ``WITHOUT ROWID`` table option (empty on PostgreSQL). Each
applied version is recorded in ``schema_migrations``; a version is never edited once released, a
change is a new file.
"""

from __future__ import annotations

import re
from importlib import resources

import msgspec

_NAME = re.compile(r"^(\d{4})_(\w+)\.sql$")
_COMMENT = re.compile(r"--[^\n]*")


class Migration(msgspec.Struct, frozen=True):
    version: int
    name: str
    sql: str

    def statements(self, pk: str, without_rowid: str = "") -> list[str]:
        text = _COMMENT.sub("", self.sql).replace("{pk}", pk).replace("{without_rowid}", without_rowid)
        return [s.strip() for s in text.split(";") if s.strip()]


def load_migrations() -> list[Migration]:
    found = []
    for entry in resources.files(__name__).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if len({m.version for m in found}) != len(found):
        raise RuntimeError("two migrations share a version number")
    return found
