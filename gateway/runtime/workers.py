"""The worker processes of one ``gateway serve``, as files named by their pids in a directory of
its own (``WORKERS_DIR_ENV``, made by ``gateway serve``): how a config reload reaches every worker
(``gateway.runtime.reload``) whatever the server. Imports nothing of the gateway: the servers'
module uses it in the supervising process."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

WORKERS_DIR_ENV = "GATEWAY_WORKERS_DIR"


def _directory() -> Path | None:
    where = os.environ.get(WORKERS_DIR_ENV)
    return Path(where) if where else None


def register_worker() -> None:
    """This process serves: its pid goes into the workers' directory (when there is one)."""
    if (where := _directory()) is not None:
        with contextlib.suppress(OSError):
            (where / str(os.getpid())).touch()


def unregister_worker() -> None:
    if (where := _directory()) is not None:
        with contextlib.suppress(OSError):
            (where / str(os.getpid())).unlink()


def signal_workers(sig: int = signal.SIGHUP, skip: int | None = None) -> int:
    """``sig`` to every registered worker but ``skip``; how many were signalled."""
    if (where := _directory()) is None:
        return 0
    sent = 0
    with contextlib.suppress(OSError):
        for entry in where.iterdir():
            if not entry.name.isdigit() or int(entry.name) == skip:
                continue
            try:
                os.kill(int(entry.name), sig)
                sent += 1
            except ProcessLookupError:
                entry.unlink(missing_ok=True)  # a worker that died without unregistering
            except OSError:
                pass
    return sent
