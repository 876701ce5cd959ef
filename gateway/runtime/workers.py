"""The worker processes of one ``gateway serve``, as files named by their pids in a directory of
its own (``WORKERS_DIR_ENV``, made by ``gateway serve``): how a config reload reaches every worker
(``gateway.runtime.reload``) whatever the server, and how one worker tells the others something
that lives in each process (``leave_notice`` and ``NoticeBox``: an operator's end of an upstream's
cool-down, ``gateway.admin.manage``). Imports nothing of the gateway: the servers' module uses it
in the supervising process."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

WORKERS_DIR_ENV = "GATEWAY_WORKERS_DIR"
# A notice is a small file in the workers' directory, read by each worker on NOTICE_SIGNAL (SIGHUP
# reloads the config, which a notice must not do as a side effect). Files older than NOTICE_KEEP_S
# are removed by the next writer: every worker has read them long before.
NOTICE_SIGNAL = signal.SIGUSR1
NOTICES_DIR = "notices"
NOTICE_KEEP_S = 300
NOTICE_MAX_BYTES = 4096


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


def leave_notice(topic: str, text: str) -> int:
    """``text`` under ``topic`` for every other worker of this serve, which are signalled
    (``NOTICE_SIGNAL``); how many were. 0 without a workers' directory (a single process)."""
    if (where := _directory()) is None:
        return 0
    box = where / NOTICES_DIR
    try:
        box.mkdir(exist_ok=True)
        _prune(box)
        final = box / f"{topic}.{time.time_ns()}.{os.getpid()}"
        partial = box / f".{final.name}"
        partial.write_text(text, encoding="utf-8")
        partial.rename(final)  # whole or absent: a worker never reads half a notice
    except OSError:
        return 0
    return signal_workers(NOTICE_SIGNAL, skip=os.getpid())


def _prune(box: Path) -> None:
    stale = time.time() - NOTICE_KEEP_S
    for entry in box.iterdir():
        with contextlib.suppress(OSError):
            if entry.stat().st_mtime < stale:
                entry.unlink()


class NoticeBox:
    """One worker's reading of the notices: each one once, none left before it started."""

    def __init__(self) -> None:
        self._seen: set[str] = set(self._names())

    @staticmethod
    def _names() -> list[str]:
        if (where := _directory()) is None:
            return []
        with contextlib.suppress(OSError):
            return [e.name for e in (where / NOTICES_DIR).iterdir() if not e.name.startswith(".")]
        return []

    def unread(self, topic: str) -> list[str]:
        """The texts of the notices under ``topic`` this worker has not read yet, oldest first."""
        where = _directory()
        names = self._names()
        self._seen &= set(names)  # a pruned notice is never seen again: forget it
        fresh = sorted((n for n in names if n not in self._seen and n.startswith(f"{topic}.")),
                       key=lambda n: n.split(".")[-2])
        texts = []
        for name in fresh:
            self._seen.add(name)
            with contextlib.suppress(OSError):
                if where is not None:
                    texts.append((where / NOTICES_DIR / name).read_bytes()[:NOTICE_MAX_BYTES].decode(
                        "utf-8", "replace"))
        return texts
