"""A media task's submission across its candidate upstreams, with the attempts that failed kept
for its request-log row (``RequestLog.attempt_log``, the console's detail of a call): the task's
row carries them (``TaskRecord.attempt_log``, migration 0017) from the submission to the
settlement, which may come much later and from another process's poller."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import msgspec

from gateway.accounts.records import FailedAttempt
from gateway.runtime.errors import UpstreamError
from gateway.tasks.family import Candidate, Submitted
from gateway.upstream.attempt import Failover, UpstreamFailure
from gateway.upstream.pool import UpstreamPool

Send = Callable[[Candidate], Awaitable[Submitted]]
_ATTEMPTS = msgspec.json.Encoder()
ERROR_CHARS = 500  # an attempt's error, as the text relay keeps it


def encoded(failed: Sequence[FailedAttempt]) -> str | None:
    """The JSON of ``failed`` for the log, None when no attempt failed."""
    return _ATTEMPTS.encode(list(failed)).decode() if failed else None


class SubmitFailed(UpstreamError):
    """Every candidate failed: the client's error, with the attempts for the task's log row."""

    def __init__(self, message: str, failed: Sequence[FailedAttempt]) -> None:
        super().__init__(message)
        self.attempt_log = encoded(failed)


async def send_with_failover(pool: UpstreamPool, max_attempts: int, candidates: Sequence[Candidate],
                             send: Send) -> tuple[Candidate, Submitted, str | None]:
    """The candidate that accepted, what it answered and the attempts that failed before it (the
    Failover policy of the text relay: cool-downs, back-off, each upstream's turn)."""
    last: UpstreamFailure | None = None
    failover = Failover(pool)
    names = [c.target.name for c in candidates]
    failed: list[FailedAttempt] = []
    for _ in range(max(max_attempts, 1)):
        index = failover.next(names)
        if index is None:
            break
        candidate = candidates[index]
        await failover.back_off(candidate.target.name)
        started = time.monotonic()
        try:
            submitted = await send(candidate)
        except UpstreamFailure as failure:
            failover.failed(candidate.target.name, failure)
            last = failure
            failed.append(FailedAttempt(upstream=candidate.target.name, status=failure.status,
                                        error=failure.reason[:ERROR_CHARS],
                                        ms=int((time.monotonic() - started) * 1000)))
            continue
        pool.mark_success(candidate.target.name)
        return candidate, submitted, encoded(failed)
    reason = last.reason if last else "no upstream available"
    raise SubmitFailed(f"The upstream failed after {len(failed)} attempt(s): {reason}.", failed)


def attempts_made(attempt_log: str | None, *, submitted: bool) -> int:
    """How many upstream attempts a task's submission made: the failed ones, plus the one that
    accepted it (at least 1, as a call that never reached an upstream is logged)."""
    failed = len(msgspec.json.decode(attempt_log)) if attempt_log else 0
    return max(failed + (1 if submitted else 0), 1)
