"""Every test taking ``storage`` runs on SQLite and on PostgreSQL (see gateway.storage.testing)."""

from gateway.storage.testing import database_url, new_principal, pg_database, storage

__all__ = ["database_url", "new_principal", "pg_database", "storage"]
