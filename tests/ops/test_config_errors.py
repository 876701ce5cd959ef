"""Issue 34 point 4: start-up and config errors that explain themselves. ``check-config`` lists every
problem of a file (at any depth, not only the first wrong value), refuses a key written twice, an
empty file and a file that serves no model, with exit code 2; a database that cannot be opened is one
line and exit code 1 at ``gateway serve`` and in the CLI, never a traceback; an unreachable Redis is
one line too, and no reason to refuse."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.settings.config import ConfigError, load_serving_config
from tests.serving import spawn, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60.0

SERVING = """
listen: {port: 8000}
models:
  - {id: gpt-x, price: {input_per_mtok: 1}}
upstreams:
  - {name: openai, protocol: chat, base_url: "http://127.0.0.1:9", models: [gpt-x]}
"""


def _gateway(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "gateway", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S, check=False)


def _write(tmp_path: Path, text: str, name: str = "gateway.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens there once closed


def test_check_config_lists_every_error_of_the_file(tmp_path: Path) -> None:
    config = _write(tmp_path, """
listen: {port: "x", host: 5, backlog: 3}
models:
  - {id: gpt-x, price: {input_per_mtok: "a", output_per_mtok: -1}}
  - {id: gpt-y, owned_by: 3}
  - {id: gpt-z, max_output_tokens: 10}
upstreams:
  - {name: a, protocol: chat, base_url: "http://x", models: [gpt-z], weight: "w"}
  - {name: b, protocol: chat, base_url: "ftp://x", models: [gpt-z, nope]}
  - {name: c, protocol: carrier-pigeon, base_url: "http://x", models: [gpt-z]}
groups: {default: {ratio: "x", rpm: 0}}
limits: {json_body_bytes: "x", sse_event_bytes: 0}
colour: blue
""")
    result = _gateway("check-config", str(config), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert sorted(result.stderr.splitlines()) == sorted([
        "listen.port: expected `int`, got `str`",
        "listen.host: expected `str`, got `int`",
        "listen.backlog: expected `int` >= 64",
        "models[0].price.input_per_mtok: expected `float | null`, got `str`",
        "models[1].owned_by: expected `str`, got `int`",
        "upstreams[0].weight: expected `int`, got `str`",
        "groups.default.ratio: expected `float`, got `str`",
        "groups.default.rpm: expected `int` >= 1",
        "limits.json_body_bytes: expected `int`, got `str`",
        "limits.sse_event_bytes: expected `int` >= 1",
        "colour: unknown key",
        # The rules beyond the types, on what decoded (nothing said twice about a broken item):
        "upstreams[1].base_url: must be an http(s) URL, got 'ftp://x'",
        "upstreams[1].models: 'nope' is not in the models catalogue",
        "upstreams[2].protocol: unknown protocol 'carrier-pigeon' (known: chat, imagetask, messages, music, "
        "v1beta, videoa, videos)",
    ])


def test_a_key_written_twice_is_refused_at_any_level(tmp_path: Path) -> None:
    config = _write(tmp_path, SERVING + """
listen: {port: 8001}
routing:
  max_attempts: 2
  cooldown_s: 5
  max_attempts: 3
""")
    result = _gateway("check-config", str(config), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "listen: duplicate key (line 8; first at line 2)",
        "routing.max_attempts: duplicate key (line 12; first at line 10)",
    ]


def test_an_empty_file_and_a_file_serving_no_model_are_refused(tmp_path: Path) -> None:
    empty = _write(tmp_path, "# nothing here yet\n\n", "empty.yaml")
    result = _gateway("check-config", str(empty), cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        2, "$: the file is empty: a config needs at least models and upstreams\n")
    no_upstream = _write(tmp_path, "models: [{id: gpt-x}]\n", "models-only.yaml")
    unserved = _write(tmp_path, SERVING.replace("models: [gpt-x]", "models: []"), "unserved.yaml")
    for path in (no_upstream, unserved):
        result = _gateway("check-config", str(path), cwd=tmp_path)
        assert (result.returncode, result.stderr) == (
            2, "models: the config serves no model: list models and an upstream that serves them "
               "(upstreams[].models)\n")
    assert _gateway("check-config", str(_write(tmp_path, SERVING)), cwd=tmp_path).returncode == 0
    with pytest.raises(ConfigError) as raised:  # the one function serve, check-config and reload use
        load_serving_config(empty)
    assert raised.value.errors == ["$: the file is empty: a config needs at least models and upstreams"]


def test_serve_refuses_what_check_config_refuses(tmp_path: Path) -> None:
    result = _gateway("serve", "--config", str(_write(tmp_path, "")), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "$: the file is empty: a config needs at least models and upstreams\n"
    assert not (tmp_path / "data").exists()


def test_an_unreachable_postgresql_is_one_line_at_serve_and_in_the_cli(tmp_path: Path) -> None:
    port = _closed_port()
    config = _write(tmp_path, SERVING + f"database: postgresql://gw:hunter2@127.0.0.1:{port}/gw\n")
    line = (f"error: cannot open the database postgresql://REDACTED@127.0.0.1:{port}/gw: "
            "connection refused (is the server running and listening there?)\n")
    for args in (("serve", "--config", str(config), "--port", str(_closed_port())),
                 ("users", "list", "--config", str(config)),
                 ("audit", "--config", str(config))):
        result = _gateway(*args, cwd=tmp_path)
        assert (result.returncode, result.stderr) == (1, line), args
        assert "hunter2" not in result.stdout + result.stderr


def test_a_database_that_refuses_the_login_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("asyncpg")
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 5432)) != 0:
            if os.environ.get("CI") == "true":
                pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
            pytest.skip("PostgreSQL is not running on 127.0.0.1:5432")
    config = _write(tmp_path, SERVING + "database: postgresql://no_such_role_f:pw@127.0.0.1:5432/gw\n")
    result = _gateway("users", "list", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 1
    where = "postgresql://REDACTED@127.0.0.1:5432/gw"
    assert result.stderr.startswith(f"error: cannot open the database {where}: ")
    assert len(result.stderr.splitlines()) == 1 and "no_such_role_f" in result.stderr


def test_an_sqlite_path_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    config = _write(tmp_path, SERVING + f"database: sqlite:///{tmp_path}/a-file/gw.db\n")
    for args in (("serve", "--config", str(config), "--port", str(_closed_port())),
                 ("keys", "list", "--config", str(config))):
        result = _gateway(*args, cwd=tmp_path)
        assert result.returncode == 1, args
        assert result.stderr == (f"error: cannot open the database sqlite:///{tmp_path}/a-file/gw.db: cannot "
                                 f"make its directory {tmp_path}/a-file: File exists\n")
    (tmp_path / "garbage.db").write_bytes(b"this is not an SQLite database, just some bytes" * 100)
    config = _write(tmp_path, SERVING + f"database: sqlite:///{tmp_path}/garbage.db\n")
    result = _gateway("users", "list", "--config", str(config), cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        1, f"error: cannot open the database sqlite:///{tmp_path}/garbage.db: file is not a database\n")


def test_an_unreachable_redis_is_one_line_in_the_cli_and_the_change_is_made(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    config = _write(tmp_path, SERVING + f"database: sqlite:///{tmp_path}/gw.db\n"
                                        f"redis: redis://127.0.0.1:{_closed_port()}/0\n")
    result = _gateway("users", "create", "--name", "alice", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "name=alice" in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Redis" in lines[0] and "polling the database" in lines[0], lines


async def test_serve_with_an_unreachable_redis_starts_and_says_so_in_one_line(tmp_path: Path) -> None:
    """Redis only carries rate-limit counts and change messages (docs/replicas.md): the gateway
    serves without it, and says so in one WARNING line, not a traceback."""
    pytest.importorskip("redis")
    port = _closed_port()
    config = _write(tmp_path, SERVING.replace("port: 8000", f"port: {port}")
                    + f"database: sqlite:///{tmp_path}/gw.db\nredis: redis://127.0.0.1:{_closed_port()}/0\n")
    log_path = tmp_path / "serve.log"
    proc = await spawn(config, log_path)
    try:
        await wait_healthy(proc, f"http://127.0.0.1:{port}", log_path)
    finally:
        assert await stop(proc) == 0
    log = log_path.read_text()
    assert "Traceback" not in log
    redis_lines = [line for line in log.splitlines() if "Redis" in line]
    assert len(redis_lines) == 1 and "WARNING" in redis_lines[0], redis_lines
