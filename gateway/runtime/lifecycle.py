"""A worker's way out (CONTRACT 6b): once told to stop, calls in flight get ``shutdown_grace_s`` to
finish; streams still open then end with their family's error event, charged what was delivered
and logged with outcome ``shutdown``; only then are the upstream pool, the meter and storage
stopped (``gateway.edge.app``'s lifespan).

How a worker learns that it is stopping depends on its server, through their public behaviour:

* granian sends the ASGI lifespan's shutdown at once on SIGTERM, while it still serves the
  requests in flight: the lifespan's exit begins the drain;
* uvicorn and hypercorn send it only once every connection is closed (after their own graceful
  timeout, when they cancel what is left): ``watch_signals`` chains a handler in front of theirs
  for SIGTERM and SIGINT, so the drain begins with the signal. Their graceful timeout is set
  beyond the grace (``gateway.server.serve``), so that the gateway, not the server, ends streams.

Requests are counted in flight by the app (``GatewayApp``), streams registered by the stream relay
(``StreamRelay``: ``shut_down`` ends one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

log = logging.getLogger("gateway.server.serve")

SignalHandler = Callable[[int, FrameType | None], Any]
# After the grace, how long streams told to end (and the calls still running) get to write their
# last event and be metered before the worker stops anyway.
CLOSING_S = 5.0


class Stoppable(Protocol):
    def shut_down(self) -> None: ...


class Lifecycle:
    """Requests in flight, open streams, and whether the worker is draining."""

    __slots__ = ("_began", "_grace_over", "_idle", "_loop", "_restore", "_streams", "chain_signals",
                 "draining", "grace_s", "in_flight")

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.chain_signals = False  # set by ``gateway serve``'s app factory (never in an embedded app)
        self.draining = False
        self.in_flight = 0
        self._streams: set[Stoppable] = set()
        self._idle: asyncio.Event | None = None
        self._grace_over: asyncio.Future[None] | None = None
        self._began = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._restore: dict[int, Any] = {}

    # --- requests and streams ---------------------------------------------------------------------

    def request_started(self) -> None:
        self.in_flight += 1

    def request_ended(self) -> None:
        self.in_flight -= 1
        if self.in_flight <= 0 and self._idle is not None:
            self._idle.set()

    def stream_opened(self, stream: Stoppable) -> None:
        self._streams.add(stream)
        if self.draining and time.monotonic() - self._began >= self.grace_s:
            stream.shut_down()  # opened after the grace: ended at once

    def stream_closed(self, stream: Stoppable) -> None:
        self._streams.discard(stream)

    # --- stopping ---------------------------------------------------------------------------------

    def begin(self) -> None:
        """Stop taking work: ``/readyz`` says so from now on, and the grace starts (its end is
        kept by a task of its own: some servers send the lifespan's shutdown only once every
        connection is closed)."""
        if self.draining:
            return
        self.draining = True
        self._began = time.monotonic()
        self._idle = asyncio.Event()
        if self.in_flight <= 0:
            self._idle.set()
        log.info("shutting down: %d request(s) in flight get up to %gs to finish", self.in_flight,
                 self.grace_s)
        self._grace_over = asyncio.ensure_future(self._end_of_grace())

    async def _end_of_grace(self) -> None:
        assert self._idle is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), self.grace_s)
        if self.in_flight <= 0:
            return
        streams = list(self._streams)
        log.info("grace of %gs over: ending %d open stream(s) (outcome shutdown)", self.grace_s, len(streams))
        for stream in streams:
            stream.shut_down()

    async def drain(self) -> None:
        """Begin (if not yet), then wait for the requests in flight: the grace, then
        ``CLOSING_S`` for the streams it ended to be written and metered."""
        self.begin()
        assert self._idle is not None and self._grace_over is not None
        left = self._began + self.grace_s + CLOSING_S - time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(left, 0.0))
        self._grace_over.cancel()
        if self.in_flight > 0:
            log.warning("%d request(s) still running %gs after the grace; stopping anyway",
                        self.in_flight, CLOSING_S)

    # --- signals (uvicorn, hypercorn) ---------------------------------------------------------------

    def watch_signals(self) -> None:
        """Begin the drain on SIGTERM or SIGINT, then let the server's own handler run (chained in
        front of it; ``unwatch_signals`` puts it back)."""
        self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue  # the default action or ignored: not a server that drains by itself
            try:
                signal.signal(sig, self._chained(previous))
            except ValueError:  # not the main thread: nothing to chain to
                return
            self._restore[sig] = previous

    def _chained(self, previous: SignalHandler) -> SignalHandler:
        def handler(signum: int, frame: FrameType | None) -> Any:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self.begin)
            return previous(signum, frame)

        return handler

    def unwatch_signals(self) -> None:
        for sig, previous in self._restore.items():
            with contextlib.suppress(ValueError):
                signal.signal(sig, previous)
        self._restore.clear()
