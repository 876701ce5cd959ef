"""The key cache forgets a changed key: at once in-process, within ~1 s from another process."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from gateway.accounts.auth import Authenticator
from gateway.admin.api import AdminOps, KeyPatch
from gateway.settings.config import Config
from gateway.storage import open_storage

from .envelopes import AuthProbe, credentials

REDIS_URL = "redis://127.0.0.1:6379/15"


@pytest_asyncio.fixture
async def probe(gateway_server: Any) -> Any:
    handle = await gateway_server(extra_plugins=[AuthProbe()])
    handle.user = await handle.create_user()
    handle.key_record = await handle.create_key(handle.user["id"])
    return handle


async def status(handle: Any) -> int:
    return (await handle.request("GET", "/probe/chat", headers=credentials("chat", handle.key))).status


async def wait_for_status(handle: Any, expected: int, within_s: float) -> float:
    """Seconds until the probe answers ``expected``; fails after ``within_s``."""
    started = time.monotonic()
    while (got := await status(handle)) != expected:
        assert time.monotonic() - started < within_s, f"still {got} after {within_s}s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_admin_changes_apply_to_the_next_call(probe: Any) -> None:
    key_id = probe.key_record["id"]
    assert await status(probe) == 200
    assert (await probe.admin("PATCH", f"/admin/keys/{key_id}", {"enabled": False})).status == 200
    assert await status(probe) == 401
    assert (await probe.admin("PATCH", f"/admin/keys/{key_id}", {"enabled": True})).status == 200
    assert await status(probe) == 200
    assert (await probe.admin("PATCH", f"/admin/keys/{key_id}", {"allow_ips": ["10.0.0.1"]})).status == 200
    assert await status(probe) == 403
    assert (await probe.admin("PATCH", f"/admin/keys/{key_id}", {"allow_ips": None})).status == 200
    assert await status(probe) == 200
    assert (await probe.admin("DELETE", f"/admin/keys/{key_id}")).status == 204
    assert await status(probe) == 401


async def test_new_key_is_usable_at_once_after_being_unknown(probe: Any) -> None:
    # A miss is cached negatively; creating any key must not leave a stale "unknown" behind.
    before = await probe.request("GET", "/probe/chat", headers=credentials("chat", "sk-" + "z" * 40))
    assert before.status == 401
    key = await probe.create_key(probe.user["id"])
    reply = await probe.request("GET", "/probe/chat", headers=credentials("chat", key["key"]))
    assert reply.status == 200


def write_config(config: Config, path: Path) -> Path:
    path.write_bytes(msgspec.json.encode(config))  # JSON is YAML
    return path


async def test_change_from_another_process_is_seen_within_a_second(probe: Any, tmp_path: Path) -> None:
    config_path = write_config(probe.gateway.config, tmp_path / "gateway.yaml")
    assert await status(probe) == 200
    cli = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "keys", "update", str(probe.key_record["id"]), "--disable",
        "--config", str(config_path), "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await cli.communicate()
    assert cli.returncode == 0, err.decode()
    assert msgspec.json.decode(out)["enabled"] is False
    assert await wait_for_status(probe, 401, within_s=1.5) < 1.5


async def _redis_available() -> bool:
    import redis.asyncio as aioredis
    from redis.exceptions import RedisError

    client = aioredis.from_url(REDIS_URL, socket_connect_timeout=0.5)
    try:
        return bool(await client.ping())
    except (RedisError, OSError):
        return False
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_redis_pubsub_invalidates_without_polling(gateway_server: Any, make_config: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if not await _redis_available():
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no Redis server answers on 127.0.0.1:6379")
        pytest.skip("no Redis server on 127.0.0.1:6379")
    import redis.asyncio as aioredis

    from gateway.accounts.auth import redis_channel

    # Polling so slow that only the Redis message can explain a prompt invalidation.
    monkeypatch.setattr(Authenticator, "poll_interval_s", 3600.0)
    config = make_config(redis=REDIS_URL)
    handle = await gateway_server(config, extra_plugins=[AuthProbe()])
    handle.user = await handle.create_user()
    handle.key_record = await handle.create_key(handle.user["id"])
    assert await status(handle) == 200

    client = aioredis.from_url(REDIS_URL)
    try:
        # Polling Redis itself: there is no event to wait on for another client's subscription.
        while (await client.pubsub_numsub(redis_channel(REDIS_URL)))[0][1] < 1:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    finally:
        await client.aclose()
    # "Another process": its own storage connection and Authenticator, as the CLI uses.
    storage = open_storage(config.database)
    await storage.open()
    auth = Authenticator(storage, config, config.redis)
    try:
        ops = AdminOps(storage, config, auth.changed)
        await ops.update_key(handle.key_record["id"], KeyPatch(enabled=False))
    finally:
        await auth.stop()
        await storage.close()
    assert await wait_for_status(handle, 401, within_s=0.5) < 0.5
