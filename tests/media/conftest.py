"""Media results through the gateway (CONTRACT 6d): the fixtures of the media families' tests
(``tests.families.media_helpers``: one upstream of each family on the session simulator, fast
task timing) and of the task engine (``tests.tasks.helpers``: PostgreSQL beside SQLite)."""

from tests.families.media_helpers import media_config, mgw
from tests.tasks.helpers import database_url, pg_database, task_config, tgw

__all__ = ["database_url", "media_config", "mgw", "pg_database", "task_config", "tgw"]
