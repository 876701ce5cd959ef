"""``/metrics`` with ``gateway serve --workers N``: every worker's series, whichever worker answers.

Workers share one port, so a scrape reaches one of them at random. ``gateway serve`` gives the
workers a private directory of its own (``PROMETHEUS_MULTIPROC_DIR``, made empty at start and
removed when the server stops), and prometheus_client's multiprocess mode keeps every series there,
one memory-mapped file per worker: the worker that answers a scrape reads all of them. Counters
and histograms are summed over the workers (a worker that exited keeps its counts, so totals never
go back); the gauges of a worker's own state (upstream health, shared services) are reported per
live worker with a ``pid`` label; requests in flight are summed over the live workers.

Per-call series are written as each call ends. The operator series read from the gateway's state
(``plugins.metrics_ops.OperatorSeries``) are written by the worker answering the scrape, and by
every other worker within ``UPDATE_DELAY_S`` of a call ending (a timer: nothing on the request
path but a flag check). A worker that stops marks itself dead (``mark_process_dead``); one that
crashed is marked dead by the next scrape. Without the variable (one worker) nothing of this runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from gateway.api import Gateway

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is imported, too
EXTENSION = "metrics_workers"
UPDATE_DELAY_S = 1.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Workers:
    def __init__(self, directory: Path, update: Callable[[], None]) -> None:
        self.directory = directory
        self.update = update
        self._pending: asyncio.TimerHandle | None = None

    @classmethod
    def start(cls, gateway: Gateway, update: Callable[[], None]) -> None:
        """Share this worker's series when ``gateway serve`` runs several (``update`` writes the
        operator series); called before the series are made."""
        directory = os.environ.get(MULTIPROC_ENV)
        if directory:
            # prometheus_client picks where values live when it is imported, and the server's parent
            # may have imported it before the directory was set (granian forks its workers from it):
            # pick again, before this worker makes any series.
            values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
            gateway.extensions[EXTENSION] = cls(Path(directory), update)

    @staticmethod
    def of(gateway: Gateway) -> Workers | None:
        workers = gateway.extensions.get(EXTENSION)
        return workers if isinstance(workers, Workers) else None

    @staticmethod
    def stop(gateway: Gateway) -> None:
        workers = gateway.extensions.pop(EXTENSION, None)
        if isinstance(workers, Workers):
            workers.cancel()
            workers.update()  # the last counts of this worker stay in the sums
            with contextlib.suppress(OSError):
                mark_process_dead(os.getpid(), str(workers.directory))  # type: ignore[no-untyped-call]

    def changed(self) -> None:
        """A call ended: write the operator series within UPDATE_DELAY_S (once per window)."""
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_later(UPDATE_DELAY_S, self._update_later)

    def _update_later(self) -> None:
        self._pending = None
        self.update()

    def cancel(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None

    def exposition(self) -> bytes:
        """Every worker's series, in the text format."""
        self._forget_dead_workers()
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, path=str(self.directory))  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def _forget_dead_workers(self) -> None:
        """A worker that crashed did not mark itself dead: its live gauges would stay for ever."""
        for path in self.directory.glob("gauge_live*_*.db"):
            pid = path.stem.rsplit("_", 1)[-1]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    mark_process_dead(int(pid), str(self.directory))  # type: ignore[no-untyped-call]
