"""The task tests' fixtures live in ``tests.tasks.helpers`` (the image-task family tests under
``tests/families`` import them from there too)."""

from tests.tasks.helpers import database_url, pg_database, task_config, tgw

__all__ = ["database_url", "pg_database", "task_config", "tgw"]
