"""The request-log row of a refused request (CONTRACT 6a).

A metered call writes its own row when it ends (``CallContext.finish``). A request refused before
it became one (no or a wrong key, a bad header or body, an unknown or forbidden model, a body too
large or too slow, a wrong path) gets its row here, built by ``EdgeMiddleware`` once the answer is
sent, from what the request's ``RequestScope`` learnt on the way: the error code it was answered
with (``note_error``, set where errors are rendered), the key and user once the credential named
them (``note_caller``) and the model once read (``note_model``). ``user_id`` and ``key_id`` are 0
where no valid key was given (the admin API shows them as null). The row goes to the meter's
bounded refusal queue (``gateway.accounts.metering.writer``), never ahead of the money.
"""

from __future__ import annotations

import time

from gateway.accounts.records import RequestLog
from gateway.relay.families import FamilyRegistry
from gateway.runtime.observe import RequestScope
from gateway.runtime.secrets_scrub import loggable_message

# Paths that answer probes and scrapers: their refusals (a 503 while the database is down) are
# not calls, and writing them would only add to the database's troubles.
UNLOGGED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
CLIENT_CLOSED = 499  # the client went away before the answer: no refusal


def is_refusal(status: int, path: str, request_scope: RequestScope) -> bool:
    """An error answer of a request that made no metered call (that one logged itself)."""
    return (status >= 400 and status != CLIENT_CLOSED and request_scope.record is None
            and path not in UNLOGGED_PATHS)


def refusal_row(request_scope: RequestScope, *, path: str, status: int, started: float, client_ip: str,
                families: FamilyRegistry) -> RequestLog:
    """The row of a refused request; ``started`` is its ``time.perf_counter()`` at arrival."""
    key, user = request_scope.key, request_scope.user
    owner = families.for_path(path)
    code = request_scope.error_code or f"http_{status}"
    return RequestLog(
        request_id=request_scope.request_id, created_at=time.time(),
        user_id=user.id if user is not None else (key.user_id if key is not None else 0),
        key_id=key.id if key is not None else 0, token_name=key.name if key is not None else "",
        route=path[:500], family=owner.name if owner is not None else "gateway",
        model=(request_scope.model or "")[:200], status=status,
        outcome="client_error" if status < 500 else "gateway_error",
        use_time_ms=int((time.perf_counter() - started) * 1000), ip=client_ip, error_code=code,
        error_message=loggable_message(request_scope.error_message, request_scope.scrubber))
