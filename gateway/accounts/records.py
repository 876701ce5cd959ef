"""Typed records shared by storage, auth, metering and plugins. Money is integer nano-USD."""

from __future__ import annotations

from typing import Literal

import msgspec


class UserRecord(msgspec.Struct, omit_defaults=True):
    id: int
    name: str
    group: str
    balance_nano: int  # spendable now: top-ups minus charges minus open reservations
    used_nano: int = 0  # settled charges, all time
    request_count: int = 0
    created_at: int = 0
    enabled: bool = True  # False: its keys and token are refused (CONTRACT 4, PATCH /admin/users)
    soft_limit_nano: int | None = None  # alert threshold on used_nano (accounts.softlimit); None = none
    reserved_nano: int = 0  # open reservations of this user (of all its keys)
    # A budget per period (``gateway.accounts.budget_periods``): at most ``budget_nano`` spent per
    # ``budget_period``; ``budget_spent_nano`` is what was counted since ``budget_start``.
    budget_nano: int | None = None
    budget_period: str | None = None  # day | week | month (UTC); None = none
    budget_start: int = 0
    budget_spent_nano: int = 0


class KeyRecord(msgspec.Struct, omit_defaults=True):
    id: int
    user_id: int
    name: str
    key_hash: str  # sha256 hex of the full key; the key itself is never stored
    masked: str  # e.g. "sk-abcd...wxyz", safe to show
    enabled: bool = True
    quota_nano: int | None = None  # the key's own spending ceiling; None = no ceiling
    spent_nano: int = 0  # settled charges of this key
    reserved_nano: int = 0  # open reservations of this key
    models: list[str] | None = None  # allowlist of public model ids; None = all
    allow_ips: list[str] | None = None  # IPs/CIDRs; None = any
    expires_at: int = 0  # Unix seconds; 0 = never
    created_at: int = 0
    rpm: int | None = None  # requests per minute (gateway.accounts.ratelimit); None = none
    tpm: int | None = None  # tokens (input plus output, as settled) per minute; None = none
    soft_limit_nano: int | None = None  # alert threshold on spent_nano (accounts.softlimit); None = none
    cache_responses: bool = False  # the response cache serves this key (plugins.cache)
    budget_nano: int | None = None  # a budget per period, as the user's (``UserRecord``)
    budget_period: str | None = None
    budget_start: int = 0
    budget_spent_nano: int = 0


class Principal(msgspec.Struct):
    """Who is calling: the authenticated key, its user (as cached), and the client IP."""

    key: KeyRecord
    user: UserRecord
    client_ip: str


Outcome = Literal[
    "success",  # served; charged actual usage
    "upstream_error",  # upstream failed before any output reached the client; no charge
    "client_error",  # rejected (bad input, upstream 4xx); no charge
    "client_disconnect",  # client went away mid-stream; charged what was generated
    "upstream_cut",  # upstream stream broke mid-way; charged what was generated
    "usage_estimated",  # served, the upstream reported no usage; charged an offline estimate
    "crash_released",  # in flight when the gateway died; reservation released at start
    "gateway_error",  # an unexpected failure inside the gateway; no charge
    "shutdown",  # a stream still open when the shutdown grace ended; charged what was generated
    "cache_hit",  # answered from the response cache (plugins.cache); charged hit_price_ratio of its cost
]


class RequestLog(msgspec.Struct, omit_defaults=True):
    request_id: str
    created_at: float  # Unix seconds
    user_id: int
    key_id: int
    token_name: str
    route: str  # the path the client called
    family: str  # chat | messages | v1beta | ...
    model: str
    status: int
    outcome: Outcome
    is_stream: bool = False
    upstream: str | None = None  # name of the upstream that answered (or the last one tried)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0
    usage_estimated: bool = False
    charge_nano: int = 0
    use_time_ms: int = 0
    first_byte_ms: int | None = None
    ip: str = ""
    error_code: str | None = None
    # The part of the actual cost that could not be charged (the balance or the key's ceiling ran
    # out before the excess over the reservation could be taken); 0 almost always.
    uncharged_nano: int = 0
    # The attempts that failed before the answer (or the error), as a JSON list of
    # ``FailedAttempt``: the console's detail of a call. None when the first attempt served it.
    attempt_log: str | None = None
    # The error message the client was answered with (``gateway.runtime.secrets_scrub.loggable_message``:
    # secrets scrubbed, capped); None when the call succeeded.
    error_message: str | None = None


class FailedAttempt(msgspec.Struct):
    """One upstream attempt of a call that failed (and was failed over, or ended the call)."""

    upstream: str
    status: int | None  # the upstream's HTTP status; None when there was no answer (connect, timeout)
    error: str  # what went wrong, secrets scrubbed
    ms: int  # how long the attempt took
