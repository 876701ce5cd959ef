"""Idempotent mutations (CONTRACT 4c): an ``Idempotency-Key`` header makes a repeat of a request
change nothing and get the first answer again.

``idempotent(caller_of)`` wraps a mutation's handler (under ``@endpoint``, so its refusals are still
answered in the family's envelope). With the header, the key is claimed in the database for the
caller's credential (``Caller.scope``) before the handler runs, so that of concurrent duplicates
exactly one is served; the others wait a moment for its answer and replay it, or get 409
``idempotency_in_progress``. A successful answer is kept 24 hours; a refusal (a 4xx: nothing
changed) frees the key, so that a corrected retry may use it. A request whose outcome is unknown
(a 5xx, a crash, a cancelled await after the handler began) keeps its claim: a repeat is refused
with ``idempotency_in_progress`` rather than risk a second effect (a second credit of money).

The kept answer may hold a secret shown once (a new API key, a user token), which the database
otherwise stores only as a hash. It is kept encrypted under a key derived from the caller's
credential and the idempotency key, neither of which the database holds: only the same caller
repeating the same key can read it back.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable

import msgspec
import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.edge.http import JSON_MEDIA_TYPE, get_gateway, read_json_body
from gateway.relay.families import bearer_token
from gateway.runtime.errors import GatewayError, InvalidRequest

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEEP_S = 24 * 3600.0  # how long a first answer is replayed (CONTRACT 4c)
WAIT_S = 5.0  # how long a duplicate waits for the first request's answer before a 409
POLL_S = 0.05
MAX_KEY_CHARS = 255

Handler = Callable[[Request], Awaitable[Response]]


class Caller(msgspec.Struct, frozen=True):
    """Whose keys these are (``admin`` or ``user:<id>``) and the credential they proved, which
    encrypts the kept answers."""

    scope: str
    secret: str


CallerOf = Callable[[Request], Awaitable[Caller]]


def conflict(message: str, code: str) -> GatewayError:
    return GatewayError(message, status=409, code=code, param=HEADER)


def header_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` (1-255 printable ASCII characters), None without one."""
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_KEY_CHARS or not all(" " <= ch <= "~" for ch in raw):
        raise InvalidRequest(f"Invalid value for `{HEADER}`: expected 1 to {MAX_KEY_CHARS} printable "
                             "ASCII characters.", param=HEADER)
    return raw


def request_hash(request: Request, body: bytes) -> str:
    """What was asked: method, path and body. A JSON body counts by its meaning (key order and
    spacing aside), so a client that re-serialises the same object repeats the same request."""
    try:
        canonical = orjson.dumps(orjson.loads(body), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONDecodeError:  # not JSON (or an integer orjson cannot hold): the bytes as sent
        canonical = body
    digest = hashlib.sha256()
    for part in (request.method.encode(), request.url.path.encode(), canonical):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


# --- the kept answer, sealed -----------------------------------------------------------------------

def _answer_key(caller: Caller, key: str) -> bytes:
    return hmac.new(caller.secret.encode(), b"gateway idempotent answer\0" + key.encode(), "sha256").digest()


def _keystream(secret_key: bytes, nonce: bytes, size: int) -> bytes:
    """BLAKE2b keyed with the answer's key, over the nonce and a block counter (a PRF in counter mode)."""
    blocks = (hashlib.blake2b(nonce + i.to_bytes(8, "big"), key=secret_key).digest()
              for i in range((size + 63) // 64))
    return b"".join(blocks)[:size]


def seal(caller: Caller, key: str, body: bytes) -> str:
    secret_key = _answer_key(caller, key)
    nonce = secrets.token_bytes(16)
    cipher = bytes(a ^ b for a, b in zip(body, _keystream(secret_key, nonce, len(body)), strict=True))
    tag = hmac.new(secret_key, nonce + cipher, "sha256").digest()[:16]
    return base64.b64encode(nonce + tag + cipher).decode()


def unseal(caller: Caller, key: str, sealed: str) -> bytes | None:
    """The kept body; None when it was sealed for another credential (or altered)."""
    try:
        raw = base64.b64decode(sealed, validate=True)
    except ValueError:
        return None
    nonce, tag, cipher = raw[:16], raw[16:32], raw[32:]
    secret_key = _answer_key(caller, key)
    if not hmac.compare_digest(tag, hmac.new(secret_key, nonce + cipher, "sha256").digest()[:16]):
        return None
    return bytes(a ^ b for a, b in zip(cipher, _keystream(secret_key, nonce, len(cipher)), strict=True))


# --- the wrapper ----------------------------------------------------------------------------------

def replay(caller: Caller, key: str, status: int, sealed: str | None) -> Response:
    body = unseal(caller, key, sealed or "")
    if body is None:
        raise conflict(f"This {HEADER} was used by another credential; send a new one.",
                       "idempotency_conflict")
    return Response(body, status_code=status, media_type=JSON_MEDIA_TYPE, headers={REPLAYED_HEADER: "true"})


def idempotent(caller_of: CallerOf) -> Callable[[Handler], Handler]:
    """Make a mutation's handler honour ``Idempotency-Key`` for the caller ``caller_of`` proves
    (it raises the usual 401 for a wrong credential)."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapped(request: Request) -> Response:
            key = header_key(request)
            if key is None:
                return await handler(request)
            caller = await caller_of(request)
            asked = request_hash(request, await read_json_body(request))
            storage = get_gateway(request).storage
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT_S
            entry = await storage.claim_idempotency(caller.scope, key, asked, KEEP_S)
            while entry is not None:
                if entry.request_hash != asked:
                    raise conflict(f"This {HEADER} was already used for a different request; send a new "
                                   "key for a new request.", "idempotency_conflict")
                if entry.status is not None:
                    return replay(caller, key, entry.status, entry.answer)
                if loop.time() >= deadline:
                    raise conflict(f"The first request with this {HEADER} has not finished (its outcome "
                                   "is unknown if it never does); look before sending a new key.",
                                   "idempotency_in_progress")
                await asyncio.sleep(POLL_S)
                entry = await storage.idempotency_entry(caller.scope, key)
                if entry is None:  # the first request was refused and freed the key: try ours
                    entry = await storage.claim_idempotency(caller.scope, key, asked, KEEP_S)
            return await serve_claimed(handler, request, caller, key)

        return wrapped

    return wrap


async def serve_claimed(handler: Handler, request: Request, caller: Caller, key: str) -> Response:
    storage = get_gateway(request).storage
    try:
        response = await handler(request)
    except GatewayError as err:
        if err.status < 500:  # refused before any change: the key is free again
            await storage.release_idempotency(caller.scope, key)
        raise
    if 200 <= response.status_code < 300:
        await storage.finish_idempotency(caller.scope, key, response.status_code,
                                         seal(caller, key, bytes(response.body)))
    elif response.status_code < 500:
        await storage.release_idempotency(caller.scope, key)
    return response


# --- callers ----------------------------------------------------------------------------------------

async def admin_caller(request: Request) -> Caller:
    gateway = get_gateway(request)
    gateway.auth.authenticate_admin(request)
    return Caller(scope="admin", secret=bearer_token(request) or "")


async def user_caller(request: Request) -> Caller:
    user = await get_gateway(request).auth.authenticate_user_token(request)
    return Caller(scope=f"user:{user.id}", secret=bearer_token(request) or "")
