"""The HTTP side of rate limits: ``Retry-After`` on a refusal and the OpenAI-style
``x-ratelimit-*`` headers on every answer to a limited key (``gateway.ratelimit`` decides).

``RateLimitHeaders`` gives each request a slot in a context variable; ``admit_call`` leaves its
verdict there (``remember``), and the middleware adds the verdict's headers to whatever response
answers the request, success or error.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from gateway.ratelimit import Verdict


def retry_after(verdict: Verdict) -> int:
    """Whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(verdict.retry_after_s))


class _Slot:
    """Where the check of the current request leaves its verdict for the headers."""

    __slots__ = ("verdict",)

    def __init__(self) -> None:
        self.verdict: Verdict | None = None


_current: ContextVar[_Slot | None] = ContextVar("gateway_ratelimit_slot", default=None)


def remember(verdict: Verdict) -> None:
    """Leave ``verdict`` for the headers of the response to the current request."""
    slot = _current.get()
    if slot is not None:
        slot.verdict = verdict


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
        headers.append(("retry-after", str(retry_after(verdict))))
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class RateLimitHeaders:
    """Pure ASGI middleware: gives each request a slot and adds the headers of its verdict (if a
    limited key's call was checked) to whatever response answers it, success or error."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        slot = _Slot()
        token = _current.set(slot)

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start" and slot.verdict is not None:
                message["headers"] = [*message.get("headers", ()), *rate_headers(slot.verdict)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_limits)
        finally:
            _current.reset(token)
