"""First start: migrate the database and, when it has no users, make a demo user and API key.

Run once by ``gateway serve`` in the parent process before any worker starts, so that workers
never race to migrate or to create the demo user.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from gateway.admin.api import AdminOps, KeyCreate, UserCreate
from gateway.edge.http import new_request_id
from gateway.runtime.secrets_scrub import redact_url
from gateway.settings.config import Config
from gateway.storage import open_storage
from gateway.storage.base import Storage

SQLITE_PREFIX = "sqlite:///"


class DemoCredentials(NamedTuple):
    user_id: int
    quota_usd: float
    api_key: str
    user_token: str


def prepare_database(database_url: str) -> None:
    """SQLite needs the directory of its file to exist (``./data`` on a fresh clone)."""
    if not database_url.startswith(SQLITE_PREFIX):
        return
    path = database_url[len(SQLITE_PREFIX):].split("?", 1)[0]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)


async def open_database(config: Config) -> Storage:
    """An open (and migrated) storage for a one-off command; the caller closes it."""
    prepare_database(config.database)
    storage = open_storage(config.database)
    await storage.open()
    return storage


async def bootstrap(config: Config) -> DemoCredentials | None:
    """Migrate; then the demo credentials if this call created them, else None (users exist)."""
    storage = await open_database(config)
    try:
        if not await storage.claim_first_start():
            return None  # users exist, or another replica starting at the same time made them

        async def bump() -> None:
            await storage.bump_auth_version()

        ops = AdminOps(storage, config, bump)
        quota = config.billing.demo_quota_usd
        user = await ops.create_user(UserCreate(name="demo", quota_usd=quota), new_request_id())
        key = await ops.create_key(KeyCreate(user_id=user["id"], name="demo"))
        return DemoCredentials(user["id"], quota, key["key"], user["user_token"])
    finally:
        await storage.close()


def demo_banner(creds: DemoCredentials, base_url: str) -> str:
    """What ``gateway serve`` prints on first start (the only time the secrets can be shown)."""
    return "\n".join([
        "=" * 72,
        f"First start: created the demo user (id {creds.user_id}, quota ${creds.quota_usd:g}).",
        f"  API key:    {creds.api_key}",
        f"  User token: {creds.user_token}",
        "Both are shown only this once (the database keeps hashes). Try:",
        f"  curl {base_url}/v1/chat/completions -H 'Authorization: Bearer {creds.api_key}' \\",
        "    -H 'Content-Type: application/json' \\",
        "    -d '{\"model\": \"sim-chat\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'",
        "=" * 72,
    ])


def startup_summary(config: Config, plugins: list[str], where: str) -> str:
    """The start-up log line: what this gateway loaded and will route to, so that a wrong config
    (a missing plugin, an upstream pointed at the wrong place) shows before the first request."""
    # The URL without its credentials (user:pass@, ?key=): this line goes to every log shipper.
    upstreams = ", ".join(
        f"{up.name} ({up.protocol}, {redact_url(up.base_url)}, {len(up.model_map())} models)"
        for up in config.upstreams) or "none"
    models = ", ".join(m.id for m in config.models) or "none"
    return (f"starting gateway: {where}; plugins: {', '.join(plugins) or 'none'}; "
            f"upstreams: {upstreams}; models: {models}")
