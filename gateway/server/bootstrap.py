"""First start: migrate the database and, when it has no users and the config uses the simulator
(or ``bootstrap.demo_user: true``), make a demo user and API key.

Run once by ``gateway serve`` in the parent process before any worker starts, so that workers
never race to migrate or to create the demo user.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

from gateway.admin.api import AdminOps, KeyCreate, UserCreate
from gateway.edge.http import new_request_id
from gateway.runtime.secrets_scrub import redact_url
from gateway.settings.config import Config, simulator_url
from gateway.settings.model_ids import is_pattern
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.urls import SQLITE_PREFIX


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


class DatabaseOpenError(Exception):
    """The database cannot be opened: one line for the operator, never a traceback."""


async def open_database(config: Config) -> Storage:
    """An open (and migrated) storage for a one-off command; the caller closes it. A database that
    cannot be reached or written is DatabaseOpenError naming it (without its password) and why."""
    sqlite = config.database.startswith(SQLITE_PREFIX)
    where = config.database if sqlite else redact_url(config.database)  # no password in the line
    try:
        prepare_database(config.database)
    except OSError as exc:
        raise DatabaseOpenError(f"cannot open the database {where}: cannot make its directory "
                                f"{exc.filename}: {exc.strerror}") from None
    storage = open_storage(config.database)
    try:
        await storage.open()
    except Exception as exc:  # each driver has its own errors; any of them here means "cannot open"
        with contextlib.suppress(Exception):  # a half-open storage: release what it holds
            await storage.close()
        if not _is_open_failure(exc):
            raise
        raise DatabaseOpenError(f"cannot open the database {where}: {_reason(exc)}") from None
    return storage


def _is_open_failure(exc: BaseException) -> bool:
    """A refused, unreachable, unwritable or rejecting database, as opposed to a bug."""
    if isinstance(exc, (OSError, TimeoutError, sqlite3.Error)):
        return True
    try:
        import asyncpg
    except ImportError:
        return False
    return isinstance(exc, (asyncpg.PostgresError, asyncpg.InterfaceError))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is the server running and listening there?)"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}" + (f": {exc.filename}" if exc.filename else "")
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def wants_demo_user(config: Config) -> bool:
    """``bootstrap.demo_user``, or by default whether the config uses the simulator: a demo user
    with money on a real provider's account is a key nobody asked for."""
    if config.bootstrap.demo_user is not None:
        return config.bootstrap.demo_user
    simulator = simulator_url(config.simulator)
    return config.simulator.enabled or any(up.base_url == simulator for up in config.upstreams)


# Printed on a start with no users and no demo user: how to make the first key.
NO_USERS_HINT = ("No users yet (no demo user: the config does not use the simulator). Make one and its "
                 "key with: gateway users create --name NAME --quota-usd 10, then gateway keys create "
                 "--user-id ID (or the admin API).")


async def bootstrap(config: Config) -> DemoCredentials | str | None:
    """Migrate; then the demo credentials if this call created them, ``NO_USERS_HINT`` when there
    are no users and the config wants no demo user, else None (users exist)."""
    storage = await open_database(config)
    try:
        if not wants_demo_user(config):
            return NO_USERS_HINT if await storage.count_users() == 0 else None
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


def example_model(config: Config, text_protocols: Collection[str]) -> str | None:
    """The first model of the catalogue that an upstream speaking one of ``text_protocols`` (those
    whose adapter generates text) serves: what the banner's example call asks for."""
    served = {public for up in config.upstreams if up.protocol in text_protocols for public in up.model_map()}
    # A wildcard pattern (``vendor/*``) is no id a call can name.
    return next((m.id for m in config.models if m.id in served and not is_pattern(m.id)), None)


def demo_banner(creds: DemoCredentials, base_url: str, model: str | None) -> str:
    """What ``gateway serve`` prints on first start (the only time the secrets can be shown); the
    example calls ``model`` (a chat call), or lists the models when the config has no text model."""
    listing = f"  curl {base_url}/v1/models -H 'Authorization: Bearer {creds.api_key}'"
    example = [listing] if model is None else [
        f"  curl {base_url}/v1/chat/completions -H 'Authorization: Bearer {creds.api_key}' \\",
        "    -H 'Content-Type: application/json' \\",
        f"    -d '{{\"model\": \"{model}\", "
        "\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}]}'"]
    return "\n".join([
        "=" * 72,
        f"First start: created the demo user (id {creds.user_id}, quota ${creds.quota_usd:g}).",
        f"  API key:    {creds.api_key}",
        f"  User token: {creds.user_token}",
        "Both are shown only this once (the database keeps hashes). Try:",
        *example,
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
