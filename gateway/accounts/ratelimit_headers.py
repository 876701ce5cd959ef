"""The HTTP side of rate limits: ``Retry-After`` on a refusal and the OpenAI-style
``x-ratelimit-*`` headers on every answer to a limited key (``gateway.accounts.ratelimit`` decides).

``admit_call`` leaves its verdict in the request's ``RequestScope`` (``remember``; the scope is a
context variable opened by ``EdgeMiddleware``), which adds the verdict's headers to whatever
response answers the request, success or error.
"""

from __future__ import annotations

import math

from gateway.accounts.ratelimit_verdict import Verdict
from gateway.runtime.observe import current_scope

# How long the official SDKs will wait on a server's Retry-After before retrying by themselves
# (openai's older releases honour up to 60 s, anthropic's any length, backing off up to 8 s): a
# refusal told to wait longer (a budget until its period ends) also says ``x-should-retry: false``,
# which each of them obeys, so a client does not spend its retries on an answer that cannot change.
SDK_RETRY_HORIZON_S = 60


def retry_after(verdict: Verdict) -> int:
    """Whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(verdict.retry_after_s))


def remember(verdict: Verdict) -> None:
    """Leave ``verdict`` for the headers of the response to the current request."""
    scope = current_scope()
    if scope is not None:
        scope.verdict = verdict


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``1s``, ``6m0s``."""
    whole = max(0, math.ceil(seconds))
    minutes, rest = divmod(whole, 60)
    return f"{minutes}m{rest}s" if minutes else f"{rest}s"


def rate_headers(verdict: Verdict) -> list[tuple[bytes, bytes]]:
    headers: list[tuple[str, str]] = []
    for name, window in (("requests", verdict.requests), ("tokens", verdict.tokens)):
        if window is not None:
            headers += [(f"x-ratelimit-limit-{name}", str(window.limit)),
                        (f"x-ratelimit-remaining-{name}", str(window.remaining)),
                        (f"x-ratelimit-reset-{name}", _duration(window.reset_s))]
    if not verdict.allowed:
        wait_s = retry_after(verdict)
        headers.append(("retry-after", str(wait_s)))
        if wait_s > SDK_RETRY_HORIZON_S:
            headers.append(("x-should-retry", "false"))
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
