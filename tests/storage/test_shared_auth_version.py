"""The auth version shared in memory by every process on one SQLite database
(gateway.storage.shared_counter): calls held from quota leases read it there, never in the
database, and still see a change made by another process at their very next call."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.accounts.auth import Authenticator
from gateway.accounts.metering.meter import Meter
from gateway.accounts.records import KeyRecord, Principal
from gateway.runtime.errors import InvalidApiKey
from gateway.storage import open_storage
from gateway.storage.base import Storage
from gateway.storage.rows import KeyChanges
from gateway.storage.shared_counter import SharedCounter
from gateway.storage.sqlite import SqliteStorage
from gateway.storage.testing import sample_log

WORST = 1_000


async def _open(path: Path) -> Storage:
    storage = open_storage(f"sqlite:///{path}")
    await storage.open()
    return storage


async def _principal(storage: Storage) -> Principal:
    user = await storage.create_user("u", "default", 10**12, "token-hash", "topup-1")
    key = await storage.create_key(KeyRecord(id=0, user_id=user.id, name="k", key_hash="key-hash",
                                             masked="sk-..."))
    return Principal(key=key, user=user, client_ip="127.0.0.1")


async def _serve(meter: Meter, principal: Principal, request_id: str) -> None:
    """One call held from a quota lease and settled."""
    hold = await meter.reserve(request_id, principal, WORST, from_lease=True)
    meter.finish(sample_log(principal, request_id), hold, WORST)


def test_two_mappings_of_one_file_see_each_others_raises_and_never_go_down(tmp_path: Path) -> None:
    a, b = SharedCounter(str(tmp_path / "x-changes")), SharedCounter(str(tmp_path / "x-changes"))
    try:
        assert a.value == b.value == 0
        a.raise_to(5)
        assert b.value == 5
        b.raise_to(3)  # a late raise to an older version never lowers it
        assert a.value == 5
        b.reset(lambda: 2)  # opening the database sets it to the database's own version
        assert a.value == 2
    finally:
        a.close()
        b.close()


async def test_a_change_by_another_storage_is_shared_at_once_and_no_database_read_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here, there = await _open(tmp_path / "g.db"), await _open(tmp_path / "g.db")
    meter = Meter(here, "inst-a")
    await meter.start()
    try:
        p = await _principal(here)
        await _serve(meter, p, "first")

        async def no_read() -> int:
            raise AssertionError("the auth version was read from the database")

        monkeypatch.setattr(here, "auth_version", no_read)
        for i in range(3):
            await _serve(meter, p, f"leased-{i}")
        assert await there.update_key(p.key.id, KeyChanges(enabled=False)) is not None
        version = await there.bump_auth_version()
        assert here.shared_auth_version() == version
        with pytest.raises(InvalidApiKey):
            await meter.reserve("after", p, WORST, from_lease=True)
    finally:
        await meter.stop()
        await here.close()
        await there.close()


async def test_a_key_disabled_by_the_cli_in_another_process_is_refused_at_the_next_call(
        tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    storage = await _open(db)
    meter = Meter(storage, "inst-a")
    await meter.start()
    try:
        p = await _principal(storage)
        await _serve(meter, p, "before")
        config_path = tmp_path / "gateway.yaml"
        config_path.write_text(f'database: "sqlite:///{db}"\n')
        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "keys", "update", str(p.key.id), "--disable",
            "--config", str(config_path), "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await cli.communicate()
        assert cli.returncode == 0, err.decode()
        with pytest.raises(InvalidApiKey):  # no wait: the very next call
            await meter.reserve("after", p, WORST, from_lease=True)
    finally:
        await meter.stop()
        await storage.close()


async def test_a_counter_behind_the_database_is_raised_by_the_next_read(tmp_path: Path) -> None:
    """A process killed between its commit and raising the counter: the next read of the version
    from the database (the auth caches poll it) raises the counter."""
    storage = await _open(tmp_path / "g.db")
    assert isinstance(storage, SqliteStorage)
    try:
        before = storage.shared_auth_version()
        assert before is not None
        committed = await super(SqliteStorage, storage).bump_auth_version()  # the commit alone
        assert storage.shared_auth_version() == before
        assert await storage.auth_version() == committed
        assert storage.shared_auth_version() == committed
    finally:
        await storage.close()


async def test_opening_sets_a_stale_counter_to_the_databases_version(tmp_path: Path) -> None:
    stale = SharedCounter(str(tmp_path / "g.db-changes"))
    stale.raise_to(10**6)  # left by an earlier database of the same name
    storage = await _open(tmp_path / "g.db")
    try:
        assert storage.shared_auth_version() == await storage.auth_version() < 10**6
        assert stale.value == storage.shared_auth_version()
    finally:
        stale.close()
        await storage.close()



async def test_a_key_disabled_through_one_gateway_is_never_served_by_another_on_the_same_file(
        gateway_server: Any, make_config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two gateways on one SQLite file, their key caches polling once an hour: B has served the
    key (its cache holds it, its lease has a slab); A's admin API disables it; B's very next call
    is refused, never served, and so are the ones after it."""
    monkeypatch.setattr(Authenticator, "poll_interval_s", 3600.0)
    config = make_config()
    a, b = await gateway_server(config), await gateway_server(config)
    user = await a.create_user("shared", quota_usd=10)
    key = await a.create_key(user["id"])
    async with openai.AsyncOpenAI(base_url=b.base_url + "/v1", api_key=key["key"], max_retries=0) as on_b:
        await on_b.chat.completions.create(model="sim-chat", max_tokens=5,
                                           messages=[{"role": "user", "content": "hello"}])
        reply = await a.admin("PATCH", f"/admin/keys/{key['id']}", {"enabled": False})
        assert reply.status == 200, reply.text
        for _ in range(3):
            with pytest.raises((openai.AuthenticationError, openai.PermissionDeniedError)):
                await on_b.chat.completions.create(model="sim-chat", max_tokens=5,
                                                   messages=[{"role": "user", "content": "still?"}])
