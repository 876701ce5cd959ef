"""A Redis server and a PostgreSQL cluster of the test's own, to stop, hang and restart.

Never the machine's services: each lives in a temporary directory on a free port and is gone
after the test. PostgreSQL refuses to run as root, so under root (CI) its commands run as the
``postgres`` user (``runuser``), in a directory that user owns. ``hang`` stops every process of the
server with SIGSTOP (a PostgreSQL cluster is a postmaster and its children: stopping the
postmaster alone leaves the open connections served), ``resume`` sends SIGCONT.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.serving import free_port

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_tree(pid: int, sig: int) -> None:
    for target in [pid, *_children(pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, sig)


def _wait_port(port: int, timeout_s: float = 15.0) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing listens on port {port} after {timeout_s}s")
        time.sleep(0.02)


class RedisServer:
    """``redis-server`` on a free port, nothing persisted."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="gw-chaos-redis-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port)

    def stop(self) -> None:
        """Gone at once (SIGKILL): every connection to it is cut, its data lost."""
        if self.proc is not None:
            self.resume()
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def hang(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PostgresCluster:
    """``initdb`` in a temporary directory, served on a free port (trust authentication)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="gw-chaos-pg-"))
        self.data = self.dir / "data"
        self._as_postgres = os.geteuid() == 0  # PostgreSQL will not run as root
        if self._as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self._run(["initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
                   "-E", "UTF8", "--no-instructions"])

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, argv: list[str]) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        done = subprocess.run([*prefix, *argv], capture_output=True, check=False, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"{argv[0]} failed ({done.returncode}): {done.stdout!r} {done.stderr!r}")

    def start(self) -> None:
        # fsync off: an immediate stop kills processes, not the machine, so what was written to the
        # OS survives. synchronous_commit stays on: a commit acknowledged must be in the WAL, or an
        # immediate stop would lose what the gateway was told is committed.
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.dir} "
                   "-c fsync=off -c full_page_writes=off -c max_connections=300")
        self._run(["pg_ctl", "start", "-w", "-t", "30", "-D", str(self.data), "-l",
                   str(self.dir / "server.log"), "-o", options])

    def running(self) -> bool:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        return subprocess.run([*prefix, "pg_ctl", "status", "-D", str(self.data)],
                              capture_output=True, check=False).returncode == 0

    def stop(self) -> None:
        """Immediate shutdown: every connection cut, as a crash or a failover would."""
        self.resume()
        self._run(["pg_ctl", "stop", "-w", "-t", "30", "-m", "immediate", "-D", str(self.data)])

    def _postmaster(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def hang(self) -> None:
        _signal_tree(self._postmaster(), signal.SIGSTOP)

    def resume(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            _signal_tree(self._postmaster(), signal.SIGCONT)

    def close(self) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
