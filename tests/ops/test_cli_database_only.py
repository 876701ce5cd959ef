"""Point 4 of issue 15: the CLI's database commands need only the database settings; upstream
secrets (and the admin key) are resolved by ``serve`` and ``check-config`` alone."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.cli.main import main as cli_main

UNSET_UPSTREAM = "GW_TEST_UNSET_UPSTREAM_SECRET"
UNSET_ADMIN = "GW_TEST_UNSET_ADMIN_KEY"


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(UNSET_UPSTREAM, raising=False)
    monkeypatch.delenv(UNSET_ADMIN, raising=False)
    monkeypatch.setenv("GW_TEST_DB", f"sqlite:///{tmp_path / 'gw.db'}")
    path = tmp_path / "gateway.yaml"
    path.write_text(f"""
database: ${{GW_TEST_DB}}
admin_key: ${{{UNSET_ADMIN}}}
models: [{{id: m}}]
upstreams:
  - name: real
    protocol: chat
    base_url: https://api.openai.com
    api_key: "${{{UNSET_UPSTREAM}}}"
    models: [m]
""")
    return path


def test_database_commands_run_without_upstream_secrets(config_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = str(config_path)
    assert cli_main(["users", "create", "--config", cfg, "--name", "ann", "--quota-usd", "5", "--json"]) == 0
    user = orjson.loads(capsys.readouterr().out)
    assert user["name"] == "ann"
    assert cli_main(["keys", "create", "--config", cfg, "--user-id", str(user["id"]), "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["key"].startswith("sk-")
    assert cli_main(["users", "topup", "--config", cfg, str(user["id"]), "1", "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["quota_usd"] == pytest.approx(6)
    assert cli_main(["users", "list", "--config", cfg, "--json"]) == 0
    assert [u["name"] for u in orjson.loads(capsys.readouterr().out)["data"]] == ["ann"]
    assert cli_main(["audit", "--config", cfg]) == 0
    assert UNSET_UPSTREAM not in capsys.readouterr().err


def test_serve_and_check_config_still_need_them(config_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["check-config", str(config_path)], ["serve", "--config", str(config_path)]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err.splitlines()
        assert f"upstreams[0].api_key: environment variable {UNSET_UPSTREAM} is not set" in err
        assert f"admin_key: environment variable {UNSET_ADMIN} is not set" in err


def test_database_commands_still_need_the_database(config_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GW_TEST_DB")
    assert cli_main(["users", "list", "--config", str(config_path)]) == 2
    assert capsys.readouterr().err.strip() == "database: environment variable GW_TEST_DB is not set"
