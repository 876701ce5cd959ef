"""``gateway serve`` as a real child process, for the tests that need one (crash, replicas)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_env() -> dict[str, str]:
    """The checkout first on the path, so the child imports this tree even where it is not
    pip-installed; unbuffered, so its log is complete when it dies."""
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": pythonpath}


async def spawn(config_path: Path, log_path: Path) -> asyncio.subprocess.Process:
    """``python -m gateway serve --config ...`` with stdout and stderr to ``log_path``."""
    with log_path.open("wb") as log:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway", "serve", "--config", str(config_path),
            stdout=log, stderr=asyncio.subprocess.STDOUT, cwd=config_path.parent, env=serve_env())


def log_tail(log_path: Path, chars: int = 3000) -> str:
    return log_path.read_text(errors="replace")[-chars:]


async def wait_healthy(proc: asyncio.subprocess.Process, base_url: str, log_path: Path) -> None:
    """Until ``/healthz`` answers 200; AssertionError with the log when it dies or times out."""
    deadline = time.monotonic() + START_TIMEOUT_S
    async with aiohttp.ClientSession() as session:
        while True:
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(base_url + "/healthz") as resp:
                    if resp.status == 200:
                        return
            if proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway serve did not start (exit {proc.returncode}):\n"
                                     f"{log_tail(log_path)}")
            await asyncio.sleep(0.02)


async def stop(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> int:
    """Signal the process (SIGKILL after 15 s) and return its exit code."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode
