"""What a rate-limit check answers (``gateway.accounts.ratelimit`` decides): allowed or not, and
each limit's state for the ``x-ratelimit-*`` headers (``gateway.accounts.ratelimit_headers``).

Apart from the limiter because the request's scope (``gateway.runtime.observe``) carries a verdict
from the check to the response headers, and the scope sits below everything that checks.
"""

from __future__ import annotations

import msgspec


class Window(msgspec.Struct, frozen=True):
    """One limit as the ``x-ratelimit-*`` headers show it after a check."""

    limit: int
    remaining: int
    reset_s: float  # until the oldest use counted in the window leaves it


class Verdict(msgspec.Struct, frozen=True):
    allowed: bool
    retry_after_s: float = 0.0  # refused: until enough of the window has passed
    requests: Window | None = None
    tokens: Window | None = None
