"""The sample third-party plugin, installed as a package (into a temporary target, never into the
venv) and found through the ``gateway`` entry-point group."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CHAT = {"model": "sim-chat", "messages": [{"role": "user", "content": "hello"}]}


def _can_build_offline() -> bool:
    """setuptools builds wheels by itself from 70.1 on; before that it needs ``wheel``."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    parts = importlib.metadata.version("setuptools").split(".")
    major, minor = (int(p) if p.isdigit() else 0 for p in [*parts, "0"][:2])
    return (major, minor) >= (70, 1)


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``pip install --target`` of a copy of examples/sample_plugin (the build writes next to its
    sources), then the target on ``sys.path`` for this module's tests only."""
    base = tmp_path_factory.mktemp("sample_plugin")
    source = base / "src"
    shutil.copytree(ROOT / "examples" / "sample_plugin", source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = base / "site"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--target", str(target)]
    if _can_build_offline():
        command += ["--no-build-isolation", "--no-index"]
    result = subprocess.run([*command, str(source)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("gateway_sample_plugin", None)
    importlib.invalidate_caches()


def test_entry_point_is_declared(installed_plugin: Path) -> None:
    found = [ep for ep in importlib.metadata.entry_points(group="gateway") if ep.name == "sample"]
    assert [ep.value for ep in found] == ["gateway_sample_plugin"]


async def test_route_and_hook_through_http(installed_plugin: Path, gateway_server: Any) -> None:
    gw = await gateway_server(load_entrypoints=True)
    assert gw.gateway.plugins.get_plugin("sample") is not None
    hello = await gw.request("GET", "/hello")
    assert hello.status == 200
    assert hello.json() == {"hello": "world", "requests_finished": 0, "last_model": None}
    assert hello.headers["X-Service-Request-Id"].startswith("req_")

    user = await gw.create_user()
    key = (await gw.create_key(user["id"]))["key"]
    assert (await gw.request("POST", "/v1/chat/completions", json=CHAT, key=key)).status == 200
    hello = await gw.request("GET", "/hello")
    assert hello.json() == {"hello": "world", "requests_finished": 1, "last_model": "sim-chat"}


async def test_not_loaded_without_entry_points(installed_plugin: Path, gateway_server: Any) -> None:
    gw = await gateway_server(load_entrypoints=False)
    assert (await gw.request("GET", "/hello")).status == 404


def test_cli_command(installed_plugin: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hello", "--name", "tester"]) == 0
    assert capsys.readouterr().out.strip() == "hello, tester, from the sample plugin"
