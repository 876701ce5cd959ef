"""The extras are optional: without asyncpg, redis, uvicorn, hypercorn and httptools the default
config is checked and served; a config or a command line asking for a missing extra is refused
with one line naming the pip command, exit code 2, no traceback.

"Not installed" is played by a ``sitecustomize`` on the child's ``PYTHONPATH`` that puts None in
``sys.modules`` for each blocked module (an import of it then fails as for a missing package); it
is read by every process the command starts, granian's workers included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.core.test_serve import ROOT, Server, e2e_config

BLOCK_ENV = "GATEWAY_TEST_BLOCKED_MODULES"
EXTRAS = ("asyncpg", "redis", "uvicorn", "hypercorn", "httptools")
SITECUSTOMIZE = f"""\
import os, sys
for name in filter(None, os.environ.get({BLOCK_ENV!r}, "").split(",")):
    sys.modules[name] = None
"""
POSTGRES_LINE = "database: postgresql:// needs the PostgreSQL driver: pip install 'model-gateway[postgres]'"
REDIS_LINE = "redis: needs the Redis client: pip install 'model-gateway[redis]'"


@pytest.fixture
def blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every child process started from here on sees the extras as not installed."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", str(site_dir))  # Server puts the checkout before it
    monkeypatch.setenv(BLOCK_ENV, ",".join(EXTRAS))


def gateway(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(ROOT), os.environ.get("PYTHONPATH", "")))}
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=60, check=False)


def config_with(tmp_path: Path, **top: object) -> Path:
    path, _, _ = e2e_config(tmp_path)
    raw = yaml.safe_load(path.read_text())
    raw.update(top)
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_block_is_real(blocked: None, tmp_path: Path) -> None:
    """The children really cannot import the extras (else every test below proves nothing)."""
    code = f"import importlib.util as u; print([u.find_spec(m) for m in {EXTRAS!r}])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=30, check=True).stdout  # the blocked environment
    assert out.strip() == str([None] * len(EXTRAS))
    imported = subprocess.run([sys.executable, "-c", "import asyncpg"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=30, check=False)
    assert imported.returncode != 0 and "ModuleNotFoundError" in imported.stderr


@pytest.mark.parametrize(("top", "line"), [
    ({"database": "postgresql://gw@127.0.0.1:5432/gw"}, POSTGRES_LINE),
    ({"database": "postgres://gw@127.0.0.1:5432/gw"},
     POSTGRES_LINE.replace("postgresql://", "postgres://")),
    ({"redis": "redis://127.0.0.1:6379/0"}, REDIS_LINE),
])
@pytest.mark.parametrize("command", ["check-config", "serve", "users"])
def test_a_missing_extra_is_one_line(blocked: None, tmp_path: Path, top: dict[str, str], line: str,
                                     command: str) -> None:
    config = config_with(tmp_path, **top)
    args = {"check-config": ("check-config", str(config)), "serve": ("serve", "--config", str(config)),
            "users": ("users", "list", "--config", str(config))}[command]
    done = gateway(*args, cwd=tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (2, line + "\n", "")


def test_a_missing_server_extra_is_one_line(blocked: None, tmp_path: Path) -> None:
    """``--server uvicorn|hypercorn`` without its extra (the check is gateway/server/servers.py's)."""
    config = config_with(tmp_path)
    for server in ("uvicorn", "hypercorn"):
        done = gateway("serve", "--config", str(config), "--server", server, cwd=tmp_path)
        assert done.returncode != 0 and done.stdout == "", done
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.endswith(f"pip install 'model-gateway[{server}]'\n"), done.stderr


async def test_the_default_needs_no_extra(blocked: None, tmp_path: Path) -> None:
    """config/gateway.yaml (on free ports) is checked and served, a call answered, on granian."""
    config, port, _ = e2e_config(tmp_path)
    checked = gateway("check-config", str(config), cwd=tmp_path)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    server = await Server.start(config)
    try:
        await server.wait_healthy(f"http://127.0.0.1:{port}")
        assert await server.terminate() == 0
    finally:
        server.kill()
    log = server.log_path.read_text()
    assert "Traceback" not in log and "None in sys.modules" not in log, log
