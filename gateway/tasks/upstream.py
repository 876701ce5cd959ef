"""HTTP to task upstreams (submit, poll, follow-up calls), on the gateway's one pooled client.

Task calls are short JSON requests of any method (a video status is a GET, a batch query a POST),
so they do not go through the text relay's ``attempt``; they share its error mapping
(``upstream_io``) and its rule for what may be retried: connection errors, timeouts, 401, 429 and
5xx raise ``UpstreamFailure``; any other answer is returned for the family to read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

import aiohttp
import msgspec
import orjson
from yarl import URL

from gateway.accounts.money import scaled_cost
from gateway.runtime.errors import UpstreamError, UpstreamHTTPError
from gateway.runtime.observe import current_request_id
from gateway.runtime.secrets_scrub import scrub_secrets
from gateway.settings.config import UpstreamConfig
from gateway.storage.rows import TaskRecord
from gateway.tasks.ssrf import CallbackGuard, UnsafeDestination, is_address
from gateway.upstream.attempt import REQUEST_ID_HEADER, UpstreamFailure, retry_after_s, upstream_io
from gateway.upstream.client import USER_AGENT, AnswerTooLarge, Destination, LoopShare, body_payload
from gateway.upstream.pool import UpstreamPool

log = logging.getLogger("gateway.upstream")

__all__ = ["BearerTaskAdapter", "TaskHttp", "TaskReply", "error_message", "poll_each", "prorated_charge",
           "query_batch", "refusal"]


class TaskReply(msgspec.Struct, frozen=True):
    status: int
    body: bytes


@dataclass(slots=True)
class BearerTaskAdapter:
    """The upstream adapter of a task protocol whose upstream takes its key as a Bearer token (a
    ``TaskAdapter``: it only carries the credential). Not frozen: ``ProtocolAdapter`` declares
    plain attributes."""

    protocol: str
    capabilities: frozenset[str] = frozenset({"task"})

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}


def error_message(body: bytes, *fallbacks: str) -> str:
    """The message of an upstream's error body: ``error.message`` (the OpenAI-style envelope),
    else the first string among the top-level ``fallbacks`` keys (a family's own shape); ""."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(data, dict):
        return ""
    err = data.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return str(err["message"])
    for key in fallbacks:
        if isinstance(data.get(key), str):
            return str(data[key])
    return ""


def refusal(reply: TaskReply, *fallbacks: str) -> UpstreamHTTPError:
    """An upstream's 4xx answer as the client's error: its status and message (``error_message``),
    or a message naming the status when the body has none."""
    message = (scrub_secrets(error_message(reply.body, *fallbacks))
               or f"The upstream answered HTTP {reply.status}.")
    return UpstreamHTTPError(reply.status, message)


MAX_REDIRECTS = 5  # hops a result download may take
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class TaskHttp:
    """Stateless beyond the pool it sends through (and, for redirects of downloads, the SSRF-guarded
    session of callbacks); one per engine."""

    def __init__(self, pool: UpstreamPool, guarded: Callable[[], aiohttp.ClientSession] | None = None,
                 guard: CallbackGuard | None = None) -> None:
        self._pool = pool
        self._guarded = guarded
        self._guard = guard

    def _timeout(self, upstream: UpstreamConfig) -> aiohttp.ClientTimeout:
        t = upstream.timeouts
        return aiohttp.ClientTimeout(total=t.total_s, sock_connect=t.connect_s, sock_read=t.idle_s)

    async def call(self, upstream: UpstreamConfig, method: str, path: str, body: bytes | None = None,
                   *, request_id: str = "", timeout_s: float | None = None) -> TaskReply:
        """One request to ``upstream.base_url + path`` with the upstream's own credential, within
        its connect and first-byte timeouts (or ``timeout_s`` for the whole call when shorter).
        Redirects are not followed (a task API answers JSON: a 3xx is a failed call); the body is
        read up to ``limits.upstream_body_bytes``."""
        headers = {"User-Agent": USER_AGENT}
        if request_id:
            headers[REQUEST_ID_HEADER] = request_id
        if body is not None:
            headers["Content-Type"] = "application/json"
        # A Destination turns the URL's user:pass@ into Basic auth unless a credential header is set:
        # aiohttp refuses credentials in a URL next to an Authorization header.
        where = Destination(*self._pool.locate(upstream, path))
        url = where.url
        headers.update(where.headers)
        t = upstream.timeouts
        limit = t.connect_s + t.first_byte_s
        if timeout_s is not None:
            limit = min(limit, timeout_s)
        body_limit = self._pool.limits.upstream_body_bytes
        payload = body_payload(body, headers)
        with upstream_io(upstream.name, f"on {method} {path.split('?', 1)[0]}"):
            async with asyncio.timeout(limit):
                async with self._pool.session.request(method, url, data=payload, headers=headers,
                                                      timeout=self._timeout(upstream),
                                                      allow_redirects=False) as resp:
                    data = await _read_within(resp, body_limit)
                    status = resp.status
                    retry_after = retry_after_s(resp.headers.get("Retry-After")) if status == 429 else None
        if status in (401, 403, 429) or status >= 500 or 300 <= status < 400:
            raise UpstreamFailure(upstream.name, f"answered HTTP {status}", status, retry_after)
        return TaskReply(status, data)

    async def open(self, upstream: UpstreamConfig, path: str, *, request_id: str = "",
                   follow_redirects: bool = True, headers: dict[str, str] | None = None,
                   total_s: float | None = None) -> aiohttp.ClientResponse:
        """A GET whose body is streamed by the caller (a result file: read ``resp.content`` in
        chunks, never the whole body at once), within the connect and first-byte timeouts; later
        reads are bounded by the idle timeout, and the whole by ``total_s`` (default the
        upstream's ``total_s``; a long download passes None and keeps its own deadline).

        ``path`` is a path of the upstream's API (sent with its credential) or an absolute URL
        the upstream handed out (a result link): on the upstream's own origin it is asked like a
        path; anywhere else only through the SSRF guard of callbacks and without the upstream's
        headers (its credential is for the upstream alone). Redirects are followed by default
        (result files often live behind one), at most ``MAX_REDIRECTS``, by the same rule.
        ``headers`` (e.g. ``Range``) go with every hop. The caller releases the response; a
        401/429/5xx raises ``UpstreamFailure`` (released here)."""
        own = {"User-Agent": USER_AGENT, **(headers or {})}
        if request_id:
            own[REQUEST_ID_HEADER] = request_id
        base = Destination(*self._pool.locate(upstream, "/"))
        if path.startswith("/"):
            where = Destination(*self._pool.locate(upstream, path))  # as in ``call``
            url, upstream_headers = where.url, where.headers
        else:
            url, upstream_headers = URL(path), base.headers
        t = upstream.timeouts
        timeout = aiohttp.ClientTimeout(total=t.total_s if total_s is None else total_s,
                                        sock_connect=t.connect_s, sock_read=t.idle_s)
        with upstream_io(upstream.name, f"on GET {url.path}"):
            async with asyncio.timeout(t.connect_s + t.first_byte_s):
                resp = await self._get(upstream.name, url, base.url.origin(), own, upstream_headers, timeout)
                hops = 0
                while follow_redirects and resp.status in _REDIRECTS and "Location" in resp.headers:
                    hops += 1
                    resp.release()
                    if hops > MAX_REDIRECTS:
                        raise UpstreamError(f"The upstream redirected more than {MAX_REDIRECTS} times.")
                    target = resp.url.join(URL(resp.headers["Location"]))
                    resp = await self._get(upstream.name, target, base.url.origin(), own, upstream_headers,
                                           timeout)
        if resp.status in (401, 429) or resp.status >= 500:
            resp.release()
            raise UpstreamFailure(upstream.name, f"answered HTTP {resp.status}", resp.status)
        return resp

    async def _get(self, name: str, url: URL, origin: URL, headers: dict[str, str],
                   upstream_headers: dict[str, str],
                   limits: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """One hop: on the upstream's origin with its headers, elsewhere through the guard."""
        if url.origin() == origin:
            return await self._pool.session.get(url, headers={**headers, **upstream_headers},
                                                timeout=limits, allow_redirects=False)
        return await self._guarded_get(name, url, headers, limits=limits)

    async def _guarded_get(self, name: str, url: URL, headers: dict[str, str], *,
                           limits: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """A GET of a download off the upstream's origin (a result link, or where a download was
        redirected): a destination the upstream chose, so checked like a callback's (public
        addresses only, unless allowed; on the addresses the connection uses) and sent without
        the upstream's credential."""
        if self._guarded is None or self._guard is None:
            raise UpstreamError("The upstream sent a download to another host, which is not followed here.")
        try:
            host, _ = self._guard.split(str(url))
            if is_address(host) and not self._guard.host_allowed(host):
                self._guard.check_address(host, host)
            return await self._guarded().get(url, headers=headers, timeout=limits, allow_redirects=False)
        except (UnsafeDestination, aiohttp.ClientError) as exc:
            refused = exc if isinstance(exc, UnsafeDestination) else exc.__cause__ or exc.__context__
            if not isinstance(refused, UnsafeDestination):
                raise
            # The operator's to know: which upstream tried to send the gateway somewhere private.
            log.warning("upstream %s sent a download to a refused destination: %s (request %s)",
                        name, refused, current_request_id() or "-")
            raise UpstreamError(f"The upstream sent the download to a refused destination: {refused}"
                                ) from exc


async def _read_within(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """A whole body, refused past ``limit`` bytes (as read, after decompression)."""
    parts: list[bytes] = []
    size = 0
    share = LoopShare()
    async for data in resp.content.iter_any():
        size += len(data)
        if size > limit:
            raise AnswerTooLarge(f"the answer body is over {limit} bytes")
        parts.append(data)
        if share.took(len(data)):
            await asyncio.sleep(0)
    return b"".join(parts)


_Snapshot = TypeVar("_Snapshot")  # a family's ``Snapshot`` (``gateway.tasks.family``, which imports this)


async def poll_each(http: TaskHttp, upstream: UpstreamConfig, tasks: Sequence[TaskRecord],
                    path: Callable[[str], str], what: str,
                    read: Callable[[TaskRecord, bytes], _Snapshot]) -> dict[str, _Snapshot]:
    """``TaskFamily.poll`` for an API without a batch query: one GET of ``path(upstream id)`` per
    task, read by ``read``. A 404 leaves the task out (forgotten: the engine fails and refunds
    it); another 4xx raises ``UpstreamError`` naming ``what`` was asked ("the task status")."""
    found: dict[str, _Snapshot] = {}
    for task in tasks:
        reply = await http.call(upstream, "GET", path(task.upstream_task_id))
        if reply.status == 404:
            continue
        if reply.status >= 400:
            raise UpstreamError(f"{what} answered HTTP {reply.status}")
        found[task.upstream_task_id] = read(task, reply.body)
    return found


_T = TypeVar("_T")


async def query_batch(http: TaskHttp, upstream: UpstreamConfig, path: str, ids: Sequence[str], what: str,
                      decoder: msgspec.json.Decoder[_T]) -> _T:
    """``TaskFamily.poll`` for an API with a batch query: ``POST path {"ids": [...]}``, its answer
    decoded by ``decoder``. A 4xx or an answer of another shape raises ``UpstreamError`` naming
    ``what`` was asked ("the music fetch")."""
    reply = await http.call(upstream, "POST", path, orjson.dumps({"ids": list(ids)}))
    if reply.status >= 400:
        raise UpstreamError(f"{what} answered HTTP {reply.status}")
    try:
        return decoder.decode(reply.body)
    except msgspec.DecodeError as exc:
        raise UpstreamError(f"{what} answered in an unknown shape") from exc


def prorated_charge(price_nano: int, made: float | None, asked: int) -> int | None:
    """The charge when an upstream reports making ``made`` of the ``asked`` units (seconds of
    video) a price was held for: the price scaled to what was made, rounded up, never above the
    price. None (charge the price) when the upstream reports nothing or nothing was asked."""
    if made is None or made < 0 or asked <= 0:
        return None
    return scaled_cost(price_nano, min(Fraction(str(made)), Fraction(asked)) / asked)
