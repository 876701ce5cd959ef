"""Who is calling: API keys for model endpoints, user tokens for management endpoints, the admin key.

Checks, in order: a credential is present (where the caller's wire family carries it: the
``WireFamily`` object extracts it), the family's required headers are right, it is ``sk-``-shaped, it exists
(looked up by its sha256), the key is enabled, not expired, and the client IP is in its allowlist.
The model allowlist is ``Catalogue.check``'s job and quota the Meter's.

The hot path does not touch the database: key hash -> (key, user) lives in a bounded in-process
cache, with a bounded negative cache for hashes that matched nothing. ``changed()`` (called after
every key or user change) empties both at once in this process and bumps the storage's auth
version; other processes see the bump by polling it (and at once through Redis pub/sub when
configured) and empty their caches too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import Request

from gateway.accounts.keys import (
    API_KEY_RULE,
    Network,
    client_ip_from,
    hash_secret,
    ip_in,
    is_api_key_shaped,
    is_user_token_shaped,
    parse_network,
    parse_networks,
)
from gateway.accounts.records import KeyRecord, Principal, UserRecord
from gateway.relay.families import BEARER_HINT, FamilyRegistry, bearer_token
from gateway.runtime.errors import ExpiredApiKey, InvalidApiKey, IpNotAllowed
from gateway.runtime.observe import note_caller
from gateway.runtime.redis_client import redis_client
from gateway.settings.config import Config
from gateway.storage.base import StorageUnavailable

if TYPE_CHECKING:
    from gateway.storage.base import Storage

log = logging.getLogger("gateway.accounts.auth")

REDIS_CHANNEL = "gateway:auth-changed"  # suffixed with the Redis db: one deployment per db


def redis_channel(redis_url: str) -> str:
    """Pub/sub ignores the db number, so deployments sharing one Redis server on different dbs
    would otherwise empty each other's caches."""
    db = urlsplit(redis_url).path.strip("/") or "0"
    return f"{REDIS_CHANNEL}:{db}"


class _Entry:
    """A cached key with its user and its parsed IP allowlist (None = any IP)."""

    __slots__ = ("key", "networks", "user")

    def __init__(self, key: KeyRecord, user: UserRecord) -> None:
        self.key = key
        self.user = user
        self.networks = _networks(key.allow_ips)


def _networks(entries: list[str] | None) -> tuple[Network, ...] | None:
    if entries is None:
        return None
    parsed = []
    for entry in entries:
        try:
            parsed.append(parse_network(entry))
        except ValueError:  # validated on write; a bad row must only ever deny, never allow
            log.warning("key allowlist entry %r is not an IP or CIDR; ignored", entry)
    return tuple(parsed)


class Authenticator:
    poll_interval_s: float = 0.5  # cross-process invalidation delay without Redis
    cache_size: int = 10_000
    negative_cache_size: int = 10_000

    def __init__(self, storage: Storage, config: Config, redis_url: str | None = None, *,
                 families: FamilyRegistry | None = None) -> None:
        self.storage = storage
        self.redis_url = redis_url
        self._families = families if families is not None else FamilyRegistry(())
        self._admin_key = config.admin_key or None
        self._trusted = parse_networks(config.trusted_proxies)
        self._cache: dict[str, _Entry] = {}
        self._unknown: dict[str, None] = {}
        # Bumped by every invalidation: a lookup that started before one must not fill the cache.
        self._generation = 0
        self._version = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._publisher: Any = None  # redis.asyncio.Redis, made on first publish
        self._redis_timeout_s = config.ratelimit.redis_timeout_s  # a hung Redis costs a change this long

    # --- life cycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        self._version = await self.storage.auth_version()
        self._tasks.append(asyncio.create_task(self._poll_version(), name="auth-version-poll"))
        if self.redis_url:
            # Subscribed before start returns: a change published right after start is not missed.
            subscribed = asyncio.get_running_loop().create_future()
            self._tasks.append(asyncio.create_task(self._listen_redis(subscribed), name="auth-redis-listen"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(subscribed), 3.0)  # else: polling covers

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._publisher is not None:
            await self._publisher.aclose()
            self._publisher = None

    # --- model endpoints -------------------------------------------------------------------------
    async def authenticate(self, request: Request, family: str) -> Principal:
        """The caller of a model endpoint of the wire family named ``family``: the family object
        finds the credential and checks its required headers; a name no family registered (the
        gateway's own endpoints, a plugin without a family) takes a Bearer credential."""
        credential = self._credential(request, family)
        entry = await self._entry(credential)
        key = entry.key
        note_caller(key, entry.user)  # a refusal from here on names the key (its request-log row)
        if not key.enabled:
            raise InvalidApiKey("This API key is disabled.")
        if not entry.user.enabled:
            raise InvalidApiKey("The account of this API key is disabled.")
        if key.expires_at and key.expires_at <= time.time():
            raise ExpiredApiKey("This API key has expired.")
        ip = self.client_ip(request)
        if entry.networks is not None and not ip_in(ip, entry.networks):
            raise IpNotAllowed(f"Requests from {ip or 'this address'} are not allowed for this API key.")
        return Principal(key=key, user=entry.user, client_ip=ip)

    def _credential(self, request: Request, family_name: str) -> str:
        family = self._families.get(family_name)
        if family is None:
            found, where = bearer_token(request), BEARER_HINT
        else:
            found, where = family.credential(request), family.credential_hint
        if not found:
            raise InvalidApiKey(f"No API key provided. Pass your API key in {where}.")
        if family is not None:
            family.check_headers(request)  # after the credential: a missing key is told first
        return found

    async def _entry(self, credential: str) -> _Entry:
        if not is_api_key_shaped(credential):
            if is_user_token_shaped(credential):
                raise InvalidApiKey("A user token cannot call model endpoints; use an API key (sk-...).")
            raise InvalidApiKey(f"Invalid API key format: {API_KEY_RULE}.")
        digest = hash_secret(credential)
        entry = self._cache.get(digest)
        if entry is not None:
            return entry
        if digest in self._unknown:
            raise InvalidApiKey("Incorrect API key provided.")
        generation = self._generation
        key = await self.storage.key_by_hash(digest)
        user = await self.storage.get_user(key.user_id) if key is not None else None
        if key is None or user is None:
            if generation == self._generation:
                _bounded_put(self._unknown, digest, None, self.negative_cache_size)
            raise InvalidApiKey("Incorrect API key provided.")
        entry = _Entry(key, user)
        if generation == self._generation:
            _bounded_put(self._cache, digest, entry, self.cache_size)
        return entry

    def client_ip(self, request: Request) -> str:
        """The socket peer; ``X-Forwarded-For`` is believed only from ``config.trusted_proxies``."""
        peer = request.client.host if request.client else None
        forwarded = None
        if self._trusted:
            forwarded = ",".join(request.headers.getlist("x-forwarded-for")) or None
        return client_ip_from(peer, forwarded, self._trusted)

    # --- management and admin endpoints ---------------------------------------------------------
    async def authenticate_user_token(self, request: Request) -> UserRecord:
        """The user of a management endpoint (``/api/user/self``, ``/api/log/self``): Bearer user
        token. Read from storage each time: these endpoints show the live balance."""
        token = bearer_token(request)
        if not token:
            raise InvalidApiKey("No user token provided. Pass it as Authorization: Bearer <user token>.")
        if not is_user_token_shaped(token):
            if is_api_key_shaped(token):
                raise InvalidApiKey("An API key cannot be used here; this endpoint takes your user token.")
            raise InvalidApiKey("Invalid user token.")
        user = await self.storage.user_by_token_hash(hash_secret(token))
        if user is None:
            raise InvalidApiKey("Invalid user token.")
        note_caller(None, user)
        if not user.enabled:
            raise InvalidApiKey("This account is disabled.")
        return user

    def authenticate_admin(self, request: Request) -> None:
        """The admin API's Bearer credential, compared in constant time. No admin key configured
        means the admin API is off: every call is refused."""
        if self._admin_key is None:
            raise InvalidApiKey("The admin API is disabled: no admin_key is configured (GATEWAY_ADMIN_KEY).")
        token = bearer_token(request) or ""
        if not hmac.compare_digest(token.encode("utf-8"), self._admin_key.encode("utf-8")):
            raise InvalidApiKey("Invalid admin key.")

    # --- invalidation ----------------------------------------------------------------------------
    async def changed(self) -> None:
        """A key or user changed: forget everything cached here, then tell other processes."""
        self._invalidate()
        self._version = await self.storage.bump_auth_version()
        if self.redis_url:
            await self._publish()

    def _invalidate(self) -> None:
        self._generation += 1
        self._cache.clear()
        self._unknown.clear()

    async def _poll_version(self) -> None:
        while True:
            await asyncio.sleep(self.poll_interval_s)
            try:
                version = await self.storage.auth_version()
            except StorageUnavailable:  # logged once per outage by the storage
                continue
            except Exception:  # a database blip must not end the poller
                log.warning("could not read the auth version; retrying", exc_info=True)
                continue
            if version != self._version:
                self._version = version
                self._invalidate()

    async def _publish(self) -> None:
        from redis.exceptions import RedisError

        url = self.redis_url
        if url is None:
            return
        try:
            if self._publisher is None:
                self._publisher = redis_client(url, self._redis_timeout_s)
            await self._publisher.publish(redis_channel(url), str(self._version))
        except (RedisError, OSError) as exc:
            # Other processes still see the bumped version within one poll interval, and every
            # hold re-checks the key and its user in the database.
            log.warning("could not publish the auth change on Redis (%s: %s); other replicas see it by "
                        "polling the database", type(exc).__name__, exc)

    async def _listen_redis(self, subscribed: asyncio.Future[None]) -> None:
        from redis.exceptions import RedisError

        assert self.redis_url is not None
        channel = redis_channel(self.redis_url)
        delay = 1.0
        told = False  # the outage was logged: once per outage, not per reconnection attempt
        while True:
            client = redis_client(self.redis_url, None)  # waits for messages as long as none come
            pubsub = client.pubsub()
            try:
                await pubsub.subscribe(channel)
                if not subscribed.done():
                    subscribed.set_result(None)
                delay, told = 1.0, False
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self._invalidate()
            except (RedisError, OSError) as exc:
                if not subscribed.done():  # start need not wait for a Redis that is not there
                    subscribed.set_result(None)
                if not told:
                    log.warning("Redis auth channel unavailable (%s); changes are seen by polling the "
                                "database until it is back", exc)
                told = True
            finally:
                await pubsub.aclose()
                await client.aclose()
            # A message may have been missed while disconnected: forget everything once.
            self._invalidate()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)


def _bounded_put(cache: dict[str, Any], digest: str, value: Any, limit: int) -> None:
    """Insert, evicting the oldest entry when full (FIFO: a hit costs nothing extra)."""
    if len(cache) >= limit:
        cache.pop(next(iter(cache)))
    cache[digest] = value

