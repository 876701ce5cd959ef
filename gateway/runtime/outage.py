"""One shared service (the database, Redis) as this process sees it: up, or down since when.

Every caller that fails to reach the service reports it (``failed``) and every success reports
that too (``answered``); the log says so once per outage and per process (at the level the caller
chose: ERROR for the database, WARNING for Redis) and once when it is back, however many calls
failed in between, so an outage is two log lines and not a stack trace per call. ``/readyz`` and
``/metrics`` read the state.
"""

from __future__ import annotations

import logging
import time


class Outage:
    def __init__(self, service: str, logger: logging.Logger, level: int, consequence: str) -> None:
        self.service = service
        self._log = logger
        self._level = level
        self._consequence = consequence  # what the gateway does meanwhile, for the log line
        self.down_since: float | None = None  # time.monotonic() of the first failure of this outage
        self.recovered_at = float("-inf")  # time.monotonic() when the last outage ended
        self.outages_total = 0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, error: BaseException) -> bool:
        """A call could not reach the service; True for the first failure of an outage."""
        if self.down_since is not None:
            return False
        self.down_since = time.monotonic()
        self.outages_total += 1
        self._log.log(self._level, "%s unavailable (%s: %s); %s", self.service, type(error).__name__,
                      error or "no answer", self._consequence)
        return True

    def answered(self, began: float) -> None:
        """A call begun at ``began`` (``time.monotonic()``) succeeded. One begun before the outage
        was noted says nothing about now (it may have been answered just before the cut)."""
        if self.down_since is None or began < self.down_since:
            return
        now = time.monotonic()
        self._log.warning("%s is back after %.1fs", self.service, now - self.down_since)
        self.down_since = None
        self.recovered_at = now

    def up_for(self) -> float:
        """Seconds since the service last came back (infinite when it never went down)."""
        return 0.0 if self.down_since is not None else time.monotonic() - self.recovered_at
