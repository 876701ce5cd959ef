"""One call on its way through the relay: the client's request (``ClientCall``) and its metering
(``CallContext``: who, what model, at what price, and its ending).

``ClientCall`` is the only per-call state of a generation: the body, the frontend's view of it,
the canonical request (decoded at most once, and only when something needs it), and what the fast
path must remember between building the upstream call and relaying its answer. Frontends are
stateless singletons that read and write it, so one frontend object serves every request. It is
defined with the ``Frontend`` interface (``gateway.relay.translation``), whose methods take it.

``CallContext`` is created once a caller is authenticated and the model checked; ``finish`` writes
its one request-log row and settles (or releases) its reservation exactly once, whatever the
outcome. The charge for each outcome follows the terminal-state policy of docs/money.md:

* ``success`` / ``usage_estimated``: the usage, as reported or estimated offline;
* ``client_disconnect`` / ``upstream_cut`` / ``shutdown``: what was generated before the stream
  ended;
* ``upstream_error`` / ``client_error``: nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import msgspec
from starlette.datastructures import Headers

from gateway.accounts.catalogue import Catalogue
from gateway.accounts.money import TokenPrices, usage_cost, worst_case_cost
from gateway.accounts.ratelimit import admit_call
from gateway.accounts.records import FailedAttempt, Outcome, Principal, RequestLog
from gateway.relay.canonical import Usage
from gateway.relay.replay import CacheLookup
from gateway.relay.translation import ClientCall as ClientCall
from gateway.runtime.context import Gateway
from gateway.runtime.observe import current_scope, note_call
from gateway.runtime.secrets_scrub import loggable_message
from gateway.settings.config import Config, ModelConfig
from gateway.storage.rows import Reservation

if TYPE_CHECKING:
    from starlette.types import Receive

_ATTEMPTS = msgspec.json.Encoder()
_CHARGED: frozenset[str] = frozenset({"success", "usage_estimated", "client_disconnect", "upstream_cut",
                                      "shutdown", "cache_hit"})


@dataclass(slots=True)
class CallContext:
    gateway: Gateway
    request_id: str
    principal: Principal
    model: ModelConfig
    route: str
    family: str
    is_stream: bool
    started: float  # time.perf_counter() once admitted
    arrived: float | None = None  # perf_counter() when its head was parsed (``gateway.edge.http.arrived``)
    reservation: Reservation | None = None
    upstream: str | None = None
    attempts: int = 0
    failed_attempts: list[FailedAttempt] | None = None  # made at the first failure (the log's detail)
    first_byte_ms: int | None = None
    finished: bool = False
    # The model the client asked for, once a fallback serves the call (``gateway.relay.fallback``):
    # ``model`` is then the fallback, whose prices and id the answer, log and charge carry.
    asked_model: str | None = None
    # What the reservation was sized for (``worst_case``'s arguments): a fallback's is sized alike.
    sizing: tuple[int, int | None, int] = (0, None, 1)
    # The request's ASGI ``receive``: a failover asks it whether the client is still there
    # (``gateway.relay.client_watch``); None where nobody waits to be answered.
    receive: Receive | None = None
    # The response cache's verdict on this call (``gateway.relay.replay``): None when no cache
    # serves it; else whether its answer is to be kept once it is complete.
    cache: CacheLookup | None = None
    # What a plugin that follows the call keeps of it (``gateway_call_started``: the telemetry
    # plugin's spans); None when no plugin observes calls (``Gateway.observes_calls``).
    trace: object | None = None
    # What the call started with: a config reload in the meantime does not change its prices,
    # groups, routing or limits (``gateway.runtime.reload``).
    config: Config = field(init=False)
    catalogue: Catalogue = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.gateway.config
        self.catalogue = self.gateway.catalogue
        if self.gateway.observes_calls:
            scope = current_scope()
            headers = Headers(raw=scope.headers if scope is not None else [])
            self.gateway.plugins.hook.gateway_call_started(ctx=self, headers=headers)

    @property
    def prices(self) -> TokenPrices:
        return self.catalogue.prices(self.model.id)

    @property
    def ratio(self) -> Fraction:
        return self.catalogue.ratio(self.principal.user.group)

    def worst_case(self, input_tokens: int, max_tokens: int | None, candidates: int = 1) -> int:
        """Each of ``candidates`` answers (``n``, ``candidateCount``) may run to the output ceiling."""
        self.sizing = (input_tokens, max_tokens, candidates)
        ceiling = max_tokens if max_tokens is not None else self.model.max_output_tokens
        return worst_case_cost(self.prices, input_tokens, ceiling * max(candidates, 1), self.ratio)

    async def reserve(self, amount_nano: int) -> None:
        # Every metered call reserves first: the rate limit is checked here, before any money is
        # held or any upstream asked (``gateway.accounts.ratelimit``).
        await admit_call(self.gateway, self.principal)
        # The hold comes from the quota lease (no database round trip); a stream's is moved into
        # a row of its own while the upstream is called (``upstream_asked``), and named before its
        # first byte (``hold_named``).
        self.reservation = await self.gateway.meter.reserve(self.request_id, self.principal, amount_nano,
                                                            from_lease=True, arrived=self.arrived)

    def upstream_asked(self) -> None:
        """The upstream request is sent: a stream's hold starts moving into a row of its own, its
        commit overlapping the upstream's work rather than delaying the request. A later attempt
        finds it moving already."""
        if self.reservation is not None and self.is_stream:
            self.gateway.meter.name(self.reservation)

    async def hold_named(self) -> None:
        """Before anything of the answer can reach the client: a stream's hold, moved out of the
        quota lease into a row of its own while the upstream was called, is in the database (a
        crash mid-stream then releases and logs the call by its request id)."""
        if self.reservation is not None and self.is_stream:
            await self.gateway.meter.named(self.reservation)

    def mark_first_byte(self) -> None:
        if self.first_byte_ms is None:
            self.first_byte_ms = int((time.perf_counter() - self.started) * 1000)

    def finish(self, status: int, outcome: Outcome, usage: Usage | None = None,
               error_code: str | None = None, charge_nano: int | None = None,
               error_message: str | None = None) -> None:
        """Write the request log and settle; a second call is ignored. ``error_message``: what the
        client was told with ``error_code`` (scrubbed and capped here)."""
        if self.finished:
            return
        self.finished = True
        usage = usage or Usage()
        # ``charge_nano``: a call priced by something other than tokens (audio minutes, characters).
        # That figure comes from the caller's own reading of the request (a duration header, a
        # length), so its reservation is its ceiling: a forged header cannot bill an hour for 4 kB.
        # A token cost is what the upstream reported: charged in full, the excess over the
        # reservation taken at settlement from what the key and the balance still allow.
        cost = charge_nano if charge_nano is not None else usage_cost(self.prices, usage, self.ratio)
        charge = cost if outcome in _CHARGED else 0
        if self.reservation is not None and charge_nano is not None:
            charge = min(charge, self.reservation.amount_nano)
        key = self.principal.key
        log = RequestLog(
            request_id=self.request_id, created_at=time.time(), user_id=key.user_id, key_id=key.id,
            token_name=key.name, route=self.route, family=self.family, model=self.model.id,
            status=status, outcome=outcome, is_stream=self.is_stream, upstream=self.upstream,
            attempts=self.attempts, prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_write_tokens, cache_read_tokens=usage.cache_read_tokens,
            reasoning_tokens=usage.reasoning_tokens, usage_estimated=usage.estimated, charge_nano=charge,
            use_time_ms=int((time.perf_counter() - self.started) * 1000), first_byte_ms=self.first_byte_ms,
            ip=self.principal.client_ip, error_code=error_code,
            attempt_log=_ATTEMPTS.encode(self.failed_attempts).decode() if self.failed_attempts else None,
            error_message=loggable_message(error_message))
        note_call(log, self.principal.user.group)  # the access log line and metrics read it
        self.gateway.meter.finish(log, self.reservation, charge)
        if self.gateway.observes_calls:
            self.gateway.plugins.hook.gateway_call_finished(ctx=self, log=log)
