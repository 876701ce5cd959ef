"""``gateway keys create|update|list`` with rate limits and the soft limit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import orjson
import pytest

from gateway.cli.main import main

if TYPE_CHECKING:
    from tests.conftest import GatewayHandle


async def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr().out
    return code, orjson.loads(out) if out.strip() else None


async def test_cli_sets_shows_and_clears_limits(gw: GatewayHandle, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gateway.yaml"
    path.write_bytes(msgspec.json.encode(gw.gateway.config))
    cfg = ["--config", str(path), "--json"]
    code, key = await run_cli(capsys, "keys", "create", "--user-id", str(gw.user["id"]), "--rpm", "7",
                              "--tpm", "900", "--soft-limit-usd", "1.5", *cfg)
    assert code == 0, key
    assert (key["rpm"], key["tpm"], key["soft_limit_usd"]) == (7, 900, 1.5)
    code, key = await run_cli(capsys, "keys", "update", str(key["id"]), "--no-tpm", "--rpm", "8", *cfg)
    assert code == 0 and (key["rpm"], key["tpm"], key["soft_limit_usd"]) == (8, None, 1.5)
    code, key = await run_cli(capsys, "keys", "update", str(key["id"]), "--no-rpm", "--no-soft-limit", *cfg)
    assert code == 0 and (key["rpm"], key["tpm"], key["soft_limit_usd"]) == (None, None, None)
    code, error = await run_cli(capsys, "keys", "update", str(key["id"]), "--rpm", "0", *cfg)
    assert code == 1 and "rpm" in error["error"]["message"]
    code, listed = await run_cli(capsys, "keys", "list", "--user-id", str(gw.user["id"]), *cfg)
    assert code == 0 and all("rpm" in k and "tpm" in k for k in listed["data"])
    # Applied at once by the serving gateway (the CLI invalidates the auth caches).
    await run_cli(capsys, "keys", "update", str(gw.key_record["id"]), "--rpm", "1", *cfg)
    await asyncio.sleep(0.7)  # no Redis here: the auth version is polled every 0.5 s
    chat = {"model": "sim-chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    assert (await gw.request("POST", "/v1/chat/completions", json=chat, key=gw.key)).status == 200
    assert (await gw.request("POST", "/v1/chat/completions", json=chat, key=gw.key)).status == 429
