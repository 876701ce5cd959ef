"""What operators see of each request: the per-request scope that ties log lines to a request,
and the HTTP-level counters of ``/metrics`` (every request, refusals included).

``EdgeMiddleware`` (``gateway.edge.middleware``) opens a ``RequestScope`` for each HTTP request in a
context variable, so that code deep in the relay needs no extra parameter to reach it:
``CallContext.finish`` notes the call's record there (``note_call``: the access log line then
carries model, key, user, upstream, attempts, tokens, cost and outcome without decoding anything
again), and every upstream failure's warning names the request (``current_request_id``). Tasks
spawned during a request inherit the scope; background work (task polls) has none. The rate-limit
check leaves its verdict there too (``gateway.accounts.ratelimit_headers.remember``), for the headers.
"""

from __future__ import annotations

from collections import defaultdict
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Protocol

from starlette.types import Scope

from gateway.accounts.ratelimit_verdict import Verdict

if TYPE_CHECKING:
    from gateway.accounts.records import KeyRecord, RequestLog, UserRecord

MAX_ROUTES = 200  # distinct route labels kept; later ones are counted as "other"
EXTENSION = "http_stats"
STATE_KEY = "observe"  # scope["state"][STATE_KEY]: the request's RequestScope (for the access log)


class TextScrubber(Protocol):
    """What the scope needs of a ``gateway.runtime.secrets_scrub.SecretScrubber``, which reads the
    scope (``scrub_secrets``) and so cannot be imported here."""

    def scrub(self, text: str) -> str: ...


class HasExtensions(Protocol):
    """The running gateway (``gateway.runtime.context.Gateway``) as far as its counters go."""

    extensions: dict[str, object]


class RequestScope:
    __slots__ = ("close_connection", "error_code", "error_message", "group", "headers", "key", "model",
                 "record", "request_id", "scrubber", "user", "verdict")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        # The request's raw headers (the ASGI scope's list, not copied), for the call hooks that
        # read a W3C ``traceparent`` (``CallContext``); set by ``EdgeMiddleware``.
        self.headers: list[tuple[bytes, bytes]] = []
        self.record: RequestLog | None = None  # the metered call of this request, once finished
        self.group: str | None = None  # its user's group
        self.verdict: Verdict | None = None  # its rate-limit check (``gateway.accounts.ratelimit_headers``)
        # The rest of the request body will not be read (too large, too slow): the answer says
        # Connection: close (``EdgeMiddleware``).
        self.close_connection = False
        # The secrets of the serving gateway's config, scrubbed from upstream text relayed to the
        # client (``gateway.runtime.secrets_scrub.scrub_secrets``); set by ``EdgeMiddleware``.
        self.scrubber: TextScrubber | None = None
        # What a refused request's log row names (``gateway.edge.refusals``): the code of the error
        # it was answered with, and the caller and model once known.
        self.error_code: str | None = None
        self.error_message: str | None = None  # the message with it, as the client read it
        self.key: KeyRecord | None = None
        self.user: UserRecord | None = None
        self.model: str | None = None


_SCOPE: ContextVar[RequestScope | None] = ContextVar("gateway_request_scope", default=None)


def open_scope(request_id: str) -> tuple[RequestScope, Token[RequestScope | None]]:
    scope = RequestScope(request_id)
    return scope, _SCOPE.set(scope)


def close_scope(token: Token[RequestScope | None]) -> None:
    _SCOPE.reset(token)


def note_call(record: RequestLog, group: str) -> None:
    """Called once per metered call (``CallContext.finish``) before the Meter reports it."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.record = record
        scope.group = group


def note_error(code: str, message: str | None = None) -> None:
    """The error code a request is being answered with (its refusal row and access-log line), and
    the message with it (the refusal row's, scrubbed there)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.error_code = code
        scope.error_message = message


def note_caller(key: KeyRecord | None, user: UserRecord | None) -> None:
    """Who is calling, once the credential named a key (or a user token its user)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.key, scope.user = key, user


def note_model(model: str) -> None:
    """The model a request asks for, once read."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.model = model


def current_scope() -> RequestScope | None:
    return _SCOPE.get()


def current_request_id() -> str | None:
    scope = _SCOPE.get()
    return scope.request_id if scope is not None else None


def group_of(record: RequestLog) -> str:
    """The user group of ``record`` when it is the current request's call, else "unknown"."""
    scope = _SCOPE.get()
    if scope is not None and scope.record is record and scope.group is not None:
        return scope.group
    return "unknown"


class HttpStats:
    """Every HTTP request by method, route template and status, and the requests in flight."""

    def __init__(self) -> None:
        self.requests: defaultdict[tuple[str, str, str], int] = defaultdict(int)
        self.in_flight = 0
        self._routes: set[str] = set()

    def route_label(self, route: str) -> str:
        if route not in self._routes:
            if len(self._routes) >= MAX_ROUTES:
                return "other"
            self._routes.add(route)
        return route

    def observe(self, method: str, route: str, status: int) -> None:
        self.requests[(method, self.route_label(route), str(status))] += 1


def http_stats(gateway: HasExtensions) -> HttpStats:
    """The app's HttpStats (made on first use; per process, like every counter of /metrics)."""
    stats = gateway.extensions.get(EXTENSION)
    if not isinstance(stats, HttpStats):
        stats = HttpStats()
        gateway.extensions[EXTENSION] = stats
    return stats


def call_fields(scope: Scope) -> dict[str, object]:
    """The access-log fields of the request's metered call or refusal row (none for other requests)."""
    request_scope = scope.get("state", {}).get(STATE_KEY)
    record = request_scope.record if isinstance(request_scope, RequestScope) else None
    if record is None:
        return {}
    return {"model": record.model or None, "key_id": record.key_id or None,
            "key_name": record.token_name or None, "user_id": record.user_id or None,
            "stream": record.is_stream, "upstream": record.upstream,
            "attempts": record.attempts, "first_byte_ms": record.first_byte_ms,
            "prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens,
            "cost_usd": round(record.charge_nano / 1e9, 9), "outcome": record.outcome,
            "error_code": record.error_code}
