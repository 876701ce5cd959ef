"""``gateway check-config`` and the admin sub-commands (run in a worker thread: they use
``asyncio.run`` of their own, as in a separate process)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from gateway.accounts.keys import is_api_key_shaped, is_user_token_shaped
from gateway.cli.main import main
from gateway.settings.config import Config

ROOT = Path(__file__).resolve().parents[2]


def test_default_config_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(ROOT / "config" / "gateway.yaml")]) == 0
    assert "OK" in capsys.readouterr().out


BAD_CONFIG = """
listen: {host: 127.0.0.1, port: "eighty"}
admin_key: hunter2-admin-secret
colour: blue
models:
  - id: m1
    price: {input_per_mtok: -1}
upstreams:
  - name: a
    protocol: chat
    base_url: http://127.0.0.1:9
    api_key: sk-upstream-secret-1
    models: [m1]
  - name: b
    protocol: chat
    base_url: http://127.0.0.1:9
    api_key: sk-upstream-secret-2
    models: [m1]
  - name: c
    protocol: chat
    base_url: ftp://nowhere
    api_key: sk-upstream-secret-3
    models: [m2]
"""


def test_check_config_reports_every_error_by_key_path(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_CONFIG)
    assert main(["check-config", str(path)]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert any(line.startswith("listen.port:") for line in lines)
    assert any(line.startswith("colour:") for line in lines)
    assert not out.out
    for secret in ("hunter2-admin-secret", "sk-upstream-secret"):
        assert secret not in out.err + out.out


def test_check_config_semantic_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_CONFIG.replace('"eighty"', "8000").replace("colour: blue\n", ""))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "upstreams[2].base_url:" in err and "upstreams[2].models:" in err
    assert "models[0].price.input_per_mtok:" in err
    assert "sk-upstream-secret" not in err and "hunter2" not in err


def test_check_config_yaml_syntax_error_does_not_quote_the_line(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text('listen: {host: 127.0.0.1}\nadmin_key: "hunter2-admin-secret\n')
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("$: not valid YAML") and len(err.strip().splitlines()) == 1
    assert "hunter2" not in err


def test_check_config_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


async def test_check_config_as_a_process(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("listen: {port: x}\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "check-config", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 2 and err.decode().startswith("listen.port:")


def config_file(config: Config, path: Path) -> str:
    path.write_bytes(msgspec.json.encode(config))  # JSON is YAML
    return str(path)


async def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """Exit code and the parsed ``--json`` output of one command."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr().out
    return code, orjson.loads(out) if out.strip() else None


async def test_admin_commands_with_json(gw: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ["--config", config_file(gw.gateway.config, tmp_path / "gateway.yaml"), "--json"]
    code, user = await run_cli(capsys, "users", "create", "--name", "carol", "--quota-usd", "3", *cfg)
    assert code == 0 and user["name"] == "carol" and user["quota_usd"] == 3.0
    assert is_user_token_shaped(user["user_token"])
    code, user = await run_cli(capsys, "users", "topup", str(user["id"]), "2.5", *cfg)
    assert code == 0 and user["quota_usd"] == 5.5
    code, users = await run_cli(capsys, "users", "list", *cfg)
    assert code == 0 and [u["name"] for u in users["data"]] == ["u", "carol"]

    code, key = await run_cli(capsys, "keys", "create", "--user-id", str(user["id"]), "--name", "cli",
                              "--models", "sim-chat,sim-embed", "--allow-ips", "127.0.0.1,10.0.0.0/8", *cfg)
    assert code == 0 and is_api_key_shaped(key["key"])
    assert key["models"] == ["sim-chat", "sim-embed"] and key["allow_ips"] == ["127.0.0.1", "10.0.0.0/8"]
    # The running gateway knows the key made by "another process" at once (it was never cached).
    reply = await gw.request("GET", "/v1/models", key=key["key"])
    assert reply.status == 200, reply.text

    code, listed = await run_cli(capsys, "keys", "list", "--user-id", str(user["id"]), *cfg)
    assert code == 0 and [k["id"] for k in listed["data"]] == [key["id"]]
    assert key["key"] not in orjson.dumps(listed).decode()

    code, updated = await run_cli(capsys, "keys", "update", str(key["id"]), "--disable", "--all-models",
                                  "--quota-usd", "1", *cfg)
    assert code == 0 and updated["enabled"] is False and updated["models"] is None
    assert updated["quota_usd"] == 1.0
    code, updated = await run_cli(capsys, "keys", "update", str(key["id"]), "--enable", "--no-quota", *cfg)
    assert updated["enabled"] is True and updated["quota_usd"] is None

    code, deleted = await run_cli(capsys, "keys", "delete", str(key["id"]), *cfg)
    assert code == 0 and deleted == {"deleted": key["id"]}
    code, error = await run_cli(capsys, "keys", "delete", str(key["id"]), *cfg)
    assert code == 1 and error["error"]["code"] == "not_found"
    code, error = await run_cli(capsys, "keys", "create", "--user-id", str(user["id"]), "--models", "nope",
                                *cfg)
    assert code == 1 and "models[0]" in error["error"]["message"]

    code, report = await run_cli(capsys, "audit", *cfg)
    assert code == 0 and report == {"ok": True, "problems": []}


async def test_admin_commands_human_output(gw: Any, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    cfg = ["--config", config_file(gw.gateway.config, tmp_path / "gateway.yaml")]
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["keys", "create", "--user-id", str(gw.user["id"]), *cfg]) == 0
    out = capsys.readouterr().out
    assert "key=sk-" in out and "shown only this once" in out
    assert await asyncio.to_thread(main, ["audit", *cfg]) == 0
    assert "clean" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["users", "topup", "999", "1", *cfg]) == 1
    assert "No user with id 999" in capsys.readouterr().err


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["keys"])
    assert exc.value.code == 2
