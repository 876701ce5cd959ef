"""Rate limits per key (CONTRACT 4, issue 13): ``rpm`` calls and ``tpm`` tokens (input plus output,
as settled) per minute, from the key itself or else from its user's group (``groups.<name>.rpm``).

``admit_call`` is the one check, made where every metered call passes before any upstream is
asked or any money held (``CallContext.reserve``, the task engine's ``submit``, and the free
``count_tokens`` routes). Over a limit it raises ``RateLimited`` (429 ``rate_limit_exceeded`` in the
caller's family envelope); ``EdgeMiddleware`` (``gateway.edge.middleware``, with
``gateway.accounts.ratelimit_headers``) then adds ``Retry-After`` (whole seconds), and to a served call of a
limited key the OpenAI-style ``x-ratelimit-*`` headers.

The window is the last 60 seconds, counted in one-second buckets (a sliding window whose edge
moves a second at a time; memory is at most 60 numbers per key and limit). Tokens are added when
a call settles (``gateway_request_finished``), so a call is admitted while the tokens of the last
minute are below ``tpm`` and its own tokens count against the calls after it.

With ``redis`` configured the buckets live in Redis and each check is one Lua script (prune, sum,
decide and count atomically, on the Redis server's clock), so the limits hold across replicas;
otherwise they live in this process. Every Redis command gives up after
``ratelimit.redis_timeout_s`` and a dropped connection is reopened once (``gateway.runtime.redis_client``).
While Redis does not answer, ``ratelimit.on_redis_error`` decides: ``allow`` lets calls through (a
rate limit protects capacity, and an outage of it must not stop the gateway), ``deny`` refuses them
503 ``service_unavailable``; one WARNING per outage (``gateway.runtime.outage``), each call so decided
counted for ``/metrics``, and Redis is asked again at most every ``RETRY_DOWN_S`` (a hung Redis then
costs the calls nothing in between), so the limits are exact again as soon as it answers. Limits
are read from the authenticated key on every call, so a PATCH applies as soon as the auth caches
are invalidated (at once on every replica through Redis pub/sub).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from gateway.accounts import softlimit
from gateway.accounts.ratelimit_headers import rate_headers as rate_headers
from gateway.accounts.ratelimit_headers import remember, retry_after
from gateway.accounts.ratelimit_verdict import Verdict as Verdict
from gateway.accounts.ratelimit_verdict import Window as Window
from gateway.accounts.records import Principal, RequestLog
from gateway.hooks.markers import hookimpl
from gateway.runtime.errors import RateLimited, ServiceUnavailable
from gateway.runtime.outage import Outage
from gateway.runtime.redis_client import redis_client

if TYPE_CHECKING:
    from gateway.runtime.context import Gateway

log = logging.getLogger("gateway.accounts.ratelimit")

WINDOW_S = 60
EXTENSION = "gateway.accounts.ratelimit"  # the limiter's slot in ``Gateway.extensions``
_TOKEN_KEYS_MAX = 100_000  # keys with a tpm seen by this process (bounded; oldest forgotten first)
RETRY_DOWN_S = 0.5  # while Redis is down, it is asked again this often (the other calls don't wait)


class Limits(msgspec.Struct, frozen=True):
    rpm: int | None = None
    tpm: int | None = None



def limits_for(gateway: Gateway, principal: Principal) -> Limits:
    """The key's own limits; a limit it does not set comes from its user's group."""
    key = principal.key
    group = gateway.config.groups.get(principal.user.group)
    rpm = key.rpm if key.rpm is not None else (group.rpm if group else None)
    tpm = key.tpm if key.tpm is not None else (group.tpm if group else None)
    return Limits(rpm=rpm, tpm=tpm)


def _verdict(limits: Limits, wait_r: float, wait_t: float, used_r: int, used_t: int,
             reset_r: float, reset_t: float) -> Verdict:
    allowed = wait_r <= 0 and wait_t <= 0
    requests = tokens = None
    if limits.rpm is not None:
        requests = Window(limits.rpm, max(limits.rpm - used_r, 0), max(reset_r, 0.0))
    if limits.tpm is not None:
        tokens = Window(limits.tpm, max(limits.tpm - used_t, 0), max(reset_t, 0.0))
    return Verdict(allowed=allowed, retry_after_s=max(wait_r, wait_t, 0.0), requests=requests, tokens=tokens)


class Backend(Protocol):
    async def check(self, ident: str, limits: Limits) -> Verdict:
        """Count one call if it is within ``limits``; never counts a refused one."""

    async def add_tokens(self, ident: str, tokens: int) -> None: ...

    async def close(self) -> None: ...


# --- in process ----------------------------------------------------------------------------------

class _Buckets:
    """Uses per whole second; a bucket counts while it is younger than the window."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}

    def used(self, now: float) -> int:
        floor = int(now) - WINDOW_S
        for sec in [s for s in self.counts if s <= floor]:
            del self.counts[sec]
        return sum(self.counts.values())

    def wait(self, used: int, limit: int, now: float) -> float:
        """Seconds until fewer than ``limit`` uses are in the window (0: already)."""
        if used < limit:
            return 0.0
        freed = 0
        for sec in sorted(self.counts):
            freed += self.counts[sec]
            if used - freed < limit:
                return sec + WINDOW_S - now
        return float(WINDOW_S)

    def reset(self, now: float) -> float:
        return min(self.counts) + WINDOW_S - now if self.counts else 0.0

    def add(self, now: float, amount: int) -> None:
        sec = int(now)
        self.counts[sec] = self.counts.get(sec, 0) + amount


class LocalBackend:
    """One process's buckets (no ``redis``); a check never awaits, so it is atomic here."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._requests: dict[str, _Buckets] = {}
        self._tokens: dict[str, _Buckets] = {}

    async def check(self, ident: str, limits: Limits) -> Verdict:
        now = self._clock()
        req = self._requests.setdefault(ident, _Buckets())
        tok = self._tokens.setdefault(ident, _Buckets())
        used_r, used_t = req.used(now), tok.used(now)
        wait_r = req.wait(used_r, limits.rpm, now) if limits.rpm is not None else 0.0
        wait_t = tok.wait(used_t, limits.tpm, now) if limits.tpm is not None else 0.0
        if wait_r <= 0 and wait_t <= 0:
            req.add(now, 1)
            used_r += 1
        return _verdict(limits, wait_r, wait_t, used_r, used_t, req.reset(now), tok.reset(now))

    async def add_tokens(self, ident: str, tokens: int) -> None:
        self._tokens.setdefault(ident, _Buckets()).add(self._clock(), tokens)

    async def close(self) -> None:
        self._requests.clear()
        self._tokens.clear()


# --- Redis ---------------------------------------------------------------------------------------

# KEYS[1]: the key's request buckets, KEYS[2]: its token buckets (hashes: second -> count).
# ARGV: rpm, tpm (0 = none), window seconds. Returns allowed, used requests, used tokens, and in
# milliseconds the wait (refused), the requests' and the tokens' reset.
_CHECK = """
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec + tonumber(t[2]) / 1000000
local window = tonumber(ARGV[3])
local function scan(key)
  local flat = redis.call('HGETALL', key)
  local used, buckets = 0, {}
  for i = 1, #flat, 2 do
    local s, c = tonumber(flat[i]), tonumber(flat[i + 1])
    if s <= sec - window then
      redis.call('HDEL', key, flat[i])
    else
      used = used + c
      buckets[#buckets + 1] = {s, c}
    end
  end
  table.sort(buckets, function(a, b) return a[1] < b[1] end)
  return used, buckets
end
local function wait(used, buckets, limit)
  if limit <= 0 or used < limit then return 0 end
  local freed = 0
  for _, b in ipairs(buckets) do
    freed = freed + b[2]
    if used - freed < limit then return b[1] + window - now end
  end
  return window
end
local function reset(buckets)
  if #buckets == 0 then return 0 end
  return buckets[1][1] + window - now
end
local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[2])
local used_r, req = scan(KEYS[1])
local used_t, tok = scan(KEYS[2])
local wait_r, wait_t = wait(used_r, req, rpm), wait(used_t, tok, tpm)
local allowed = 0
if wait_r == 0 and wait_t == 0 then
  allowed = 1
  redis.call('HINCRBY', KEYS[1], sec, 1)
  redis.call('EXPIRE', KEYS[1], window + 1)
  used_r = used_r + 1
  if #req == 0 then req = {{sec, 1}} end
end
return {allowed, used_r, used_t, math.ceil(math.max(wait_r, wait_t) * 1000),
        math.ceil(reset(req) * 1000), math.ceil(reset(tok) * 1000)}
"""

_ADD = """
local sec = tonumber(redis.call('TIME')[1])
redis.call('HINCRBY', KEYS[1], sec, tonumber(ARGV[1]))
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[2]) + 1)
return 1
"""


class RedisBackend:
    """Buckets in Redis, shared by every replica; one script call per check. ``on_error`` is the
    ``ratelimit.on_redis_error`` policy applied while Redis does not answer."""

    def __init__(self, url: str, *, timeout_s: float = 0.25, on_error: str = "allow") -> None:
        self._client: Any = redis_client(url, timeout_s)
        self._check: Any = self._client.register_script(_CHECK)
        self._add: Any = self._client.register_script(_ADD)
        self.on_error = on_error
        consequence = ("rate-limited calls are served unlimited" if on_error == "allow"
                       else "rate-limited calls are refused 503")
        self.outage = Outage("Redis", log, logging.WARNING,
                             f"{consequence} (ratelimit.on_redis_error: {on_error}) until it answers")
        self.decided: dict[str, int] = {"allowed": 0, "refused": 0}  # calls decided by the policy
        self._next_try = 0.0  # while down: not asked again before this (time.monotonic())

    @staticmethod
    def _keys(ident: str) -> list[str]:
        return [f"gateway:rl:{ident}:r", f"gateway:rl:{ident}:t"]

    def _skip(self) -> bool:
        """Down and asked too recently: do not wait for it again yet."""
        return self.outage.down and time.monotonic() < self._next_try

    def _failed(self, exc: BaseException) -> None:
        self.outage.failed(exc)
        self._next_try = time.monotonic() + RETRY_DOWN_S

    def _policy(self) -> Verdict:
        if self.on_error == "deny":
            self.decided["refused"] += 1
            raise ServiceUnavailable("Rate limits cannot be checked right now; please retry shortly.")
        self.decided["allowed"] += 1
        return Verdict(allowed=True)

    async def check(self, ident: str, limits: Limits) -> Verdict:
        from redis.exceptions import RedisError

        if self._skip():
            return self._policy()
        began = time.monotonic()
        try:
            answer = await self._check(keys=self._keys(ident),
                                       args=[limits.rpm or 0, limits.tpm or 0, WINDOW_S])
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return self._policy()
        self.outage.answered(began)
        allowed, used_r, used_t, wait_ms, reset_r, reset_t = (int(v) for v in answer)
        wait_s = wait_ms / 1000 if not allowed else 0.0
        return _verdict(limits, wait_s, 0.0, used_r, used_t, reset_r / 1000, reset_t / 1000)

    async def add_tokens(self, ident: str, tokens: int) -> None:
        """Tokens settled while Redis is down are not counted (the policy covers that time)."""
        from redis.exceptions import RedisError

        if self._skip():
            return
        began = time.monotonic()
        try:
            await self._add(keys=self._keys(ident)[1:], args=[tokens, WINDOW_S])
        except (RedisError, OSError) as exc:
            self._failed(exc)
            return
        self.outage.answered(began)

    async def ping(self) -> None:
        """Raise when Redis does not answer (``/readyz``); the outage state follows."""
        from redis.exceptions import RedisError

        began = time.monotonic()
        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            self._failed(exc)
            raise
        self.outage.answered(began)

    async def close(self) -> None:
        await self._client.aclose()


# --- the limiter of one gateway ------------------------------------------------------------------

class RateLimiter:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._token_keys: dict[int, str] = {}  # key id -> ident, for keys admitted with a tpm
        self._pending: set[asyncio.Task[None]] = set()

    @staticmethod
    def ident(principal: Principal) -> str:
        # The key's hash, not its id: unique across every deployment sharing one Redis.
        return principal.key.key_hash

    async def admit(self, limits: Limits, principal: Principal) -> Verdict:
        ident = self.ident(principal)
        if limits.tpm is not None:
            if len(self._token_keys) >= _TOKEN_KEYS_MAX and principal.key.id not in self._token_keys:
                self._token_keys.pop(next(iter(self._token_keys)))
            self._token_keys[principal.key.id] = ident
        return await self.backend.check(ident, limits)

    def settled(self, record: RequestLog) -> None:
        """A call ended: its tokens count against its key's tpm (when the key has one)."""
        tokens = record.prompt_tokens + record.completion_tokens
        ident = self._token_keys.get(record.key_id)
        if tokens <= 0 or ident is None:
            return
        task = asyncio.get_running_loop().create_task(self.backend.add_tokens(ident, tokens))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def close(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        await self.backend.close()


def limiter_of(gateway: Gateway) -> RateLimiter:
    """This gateway's limiter, made on first use (on Redis when ``redis`` is configured)."""
    found = gateway.extensions.get(EXTENSION)
    if isinstance(found, RateLimiter):
        return found
    url, settings = gateway.config.redis, gateway.config.ratelimit
    backend: Backend = LocalBackend()
    if url:
        backend = RedisBackend(url, timeout_s=settings.redis_timeout_s, on_error=settings.on_redis_error)
    limiter = RateLimiter(backend)
    gateway.extensions[EXTENSION] = limiter
    return limiter


async def admit_call(gateway: Gateway, principal: Principal) -> None:
    """Count one metered call of ``principal``'s key; ``RateLimited`` when over a limit. A key
    without limits (its own or its group's) costs nothing here."""
    softlimit.note(gateway, principal)  # the same admission decides which settlements to watch
    limits = limits_for(gateway, principal)
    if limits.rpm is None and limits.tpm is None:
        return
    verdict = await limiter_of(gateway).admit(limits, principal)
    remember(verdict)
    if not verdict.allowed:
        wait = retry_after(verdict)
        which = ("requests" if verdict.requests is not None and verdict.requests.remaining == 0
                 else "tokens")
        limit = limits.rpm if which == "requests" else limits.tpm
        raise RateLimited(f"Rate limit reached for this API key: {limit} {which} per minute. "
                          f"Please try again in {wait}s.")


# --- hooks (registered as the built-in plugin ``gateway.accounts.ratelimit``) ----------------------------

@hookimpl
def gateway_request_finished(gateway: Gateway, log: RequestLog) -> None:
    limiter = gateway.extensions.get(EXTENSION)
    if isinstance(limiter, RateLimiter):
        limiter.settled(log)


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    limiter = gateway.extensions.pop(EXTENSION, None)
    if isinstance(limiter, RateLimiter):
        with contextlib.suppress(Exception):
            await limiter.close()
