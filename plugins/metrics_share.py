"""``/metrics`` with ``gateway serve --workers N``: every worker's series, whichever worker answers.

Workers share one port, so a scrape reaches one of them at random. ``gateway.server.servers`` gives the
workers a directory (``GATEWAY_METRICS_DIR``, removed when the server stops); each worker writes
its rendered series there, labelled ``worker="<pid>"``, at most once a second after a request
finished (a timer, nothing on the request path but a flag check), and the worker that answers a
scrape merges the files of the live workers into one exposition, each family once. Sum over
``worker`` in queries; a worker restarted under a new pid starts new series, as Prometheus
expects of a restarted process. Without the variable (one worker) nothing of this runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

SHARE_ENV = "GATEWAY_METRICS_DIR"
DUMP_DELAY_S = 1.0


def label(body: str, worker: str) -> str:
    """Every sample line of ``body`` with ``worker="<worker>"`` as its first label."""
    out: list[str] = []
    for line in body.splitlines():
        if not line or line.startswith("#"):
            out.append(line)
            continue
        brace, space = line.find("{"), line.find(" ")
        if 0 <= brace < space:
            out.append(f'{line[:brace + 1]}worker="{worker}",{line[brace + 1:]}')
        else:
            out.append(f'{line[:space]}{{worker="{worker}"}}{line[space:]}')
    return "\n".join(out) + "\n"


def merge(bodies: list[str]) -> str:
    """One exposition from several: each family's HELP/TYPE once, then its samples from all."""
    headers: dict[str, list[str]] = {}
    samples: dict[str, list[str]] = {}
    for body in bodies:
        family = ""
        for line in body.splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                family = line.split(" ", 3)[2]
                known = headers.setdefault(family, [])
                if line not in known:
                    known.append(line)
                samples.setdefault(family, [])
            elif line:
                samples.setdefault(family, []).append(line)
                headers.setdefault(family, [])
    out: list[str] = []
    for family, lines in headers.items():
        out += lines
        out += samples.get(family, [])
    return "\n".join(out) + "\n"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Share:
    def __init__(self, directory: Path, render: Callable[[], str]) -> None:
        self.directory = directory
        self.render = render
        self.worker = str(os.getpid())
        self._pending: asyncio.TimerHandle | None = None

    @classmethod
    def from_environment(cls, render: Callable[[], str]) -> Share | None:
        directory = os.environ.get(SHARE_ENV)
        return cls(Path(directory), render) if directory else None

    def changed(self) -> None:
        """A request finished: write this worker's series within DUMP_DELAY_S (once per window)."""
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(DUMP_DELAY_S, self._dump_later)

    def _dump_later(self) -> None:
        self._pending = None
        self.dump(self.render())

    def dump(self, body: str) -> str:
        labelled = label(body, self.worker)
        with contextlib.suppress(OSError):  # a full disk must not break serving; the scrape still works
            tmp = self.directory / f".{self.worker}.tmp"
            tmp.write_text(labelled)
            tmp.replace(self.directory / f"{self.worker}.prom")
        return labelled

    def stop(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        with contextlib.suppress(OSError):
            (self.directory / f"{self.worker}.prom").unlink()

    def merged(self, own: str) -> str:
        """This worker's series (fresh) and the last written series of every other live worker."""
        bodies = [self.dump(own)]
        for path in sorted(self.directory.glob("*.prom")):
            if path.stem == self.worker or not path.stem.isdigit():
                continue
            if not _alive(int(path.stem)):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            with contextlib.suppress(OSError):
                bodies.append(path.read_text())
        return merge(bodies)
