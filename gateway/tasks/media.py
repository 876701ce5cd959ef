"""Result files of media tasks served by the gateway (CONTRACT 6d): the links clients get, and
what each link stands for.

A family that has result files (an image, a song's audio, a video and its thumbnail) tells the
engine where each one is with an optional ``media(task)`` method (``MediaFamily``): a mapping of
*slot* names ("image", "clip1-audio", "video"...) to a ``MediaItem`` (the upstream's link as the
family stored it, or a path of the upstream's API, and the file's kind). Everything else is here:

* ``MediaLinks.shown(task, base)``: the task as clients see it: every string of its
  ``result_json`` that is a slot's upstream link becomes the gateway's link to that slot, so a
  family's own rendering (routes and callbacks) hands out gateway links without knowing them.
  An upstream configured with ``media_links: upstream`` keeps its own links.
* A gateway link is ``<base>/v1/media/<task id>/<slot>.<ext>?expires=<unix s>&signature=<hmac>``:
  a capability a browser can use as it is (``<img src>``, ``<video src>``, a callback receiver),
  like the CDN links these APIs hand out. The signature is an HMAC-SHA256 of task, slot and expiry
  under a key the gateway makes once in its database (a document, shared by every replica);
  ``expires`` is at least ``tasks.media_link_ttl_s`` away, rounded up to the hour so that a task
  fetched again within the hour shows the same links. Without a signature the same path takes the
  owner's API key instead (another user's task is 404).
* ``<base>`` is ``tasks.public_url`` when set, else the address the request came to; a callback
  has no request, so without ``tasks.public_url`` its links stay the upstream's.

The download itself (SSRF guard, streaming, limits) is ``gateway.tasks.download``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import mimetypes
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import msgspec
import orjson

from gateway.storage.rows import Document, DocumentExists, TaskRecord
from gateway.upstream.client import Destination

if TYPE_CHECKING:
    from starlette.requests import Request

    from gateway.runtime.context import Gateway
    from gateway.tasks.family import TaskFamily

__all__ = ["MEDIA_PATH", "MediaFamily", "MediaItem", "MediaLinks", "file_item", "items_of", "slot_of"]

MEDIA_PATH = "/v1/media"
_KEY_DOC = ("gateway-secret", "media-links")  # (kind, id) of the signing key's document
_HOUR = 3600


class MediaItem(msgspec.Struct, frozen=True):
    """One result file: where the upstream keeps it and what it is."""

    source: str  # the upstream's link (as stored in result_json), or a path of its API ("/v1/...")
    ext: str  # file extension shown in the gateway's link ("png", "mp4")
    media_type: str  # Content-Type when the upstream names none


@runtime_checkable
class MediaFamily(Protocol):
    """The optional part of a ``TaskFamily`` that has result files."""

    def media(self, task: TaskRecord) -> Mapping[str, MediaItem]:
        """The task's result files by slot name (letters, digits and ``-``), as its result stands
        now (a song's first clip may be there before the task ends); empty when there are none."""
        ...


def file_item(source: str, ext: str, media_type: str) -> MediaItem:
    """A result file at ``source``: its extension and kind from the link's path when it has a
    known one (``.../a.webp`` -> ``webp``, ``image/webp``), else ``ext`` and ``media_type``."""
    name = urlsplit(source).path.rsplit("/", 1)[-1]
    found = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    guessed = mimetypes.types_map.get(f".{found}") if found.isalnum() and len(found) <= 5 else None
    return MediaItem(source, found, guessed) if guessed else MediaItem(source, ext, media_type)


def slot_of(file: str) -> str:
    """The slot of the last path segment of a media link (``video.mp4`` -> ``video``)."""
    return file.split(".", 1)[0]


def items_of(family: TaskFamily | None, task: TaskRecord) -> Mapping[str, MediaItem]:
    if family is None or not isinstance(family, MediaFamily):
        return {}
    return family.media(task)


class MediaLinks:
    """One per engine: the signing key and the link rules."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._key: bytes | None = None

    async def load_key(self) -> None:
        """The signing key from the database, made on first use (the first replica's wins)."""
        storage = self._gateway.storage
        doc = await storage.get_document(*_KEY_DOC)
        if doc is None:
            made = Document(kind=_KEY_DOC[0], id=_KEY_DOC[1], user_id=0,
                            body=orjson.dumps({"key": secrets.token_hex(32)}).decode())
            try:
                doc = await storage.put_document(made)
            except DocumentExists:
                doc = await storage.get_document(*_KEY_DOC)
        if doc is None:
            raise RuntimeError("the media link key could not be stored")
        self._key = bytes.fromhex(orjson.loads(doc.body)["key"])

    # --- signatures ------------------------------------------------------------------------------
    def _sign(self, task_id: str, slot: str, expires: int) -> str:
        if self._key is None:
            raise RuntimeError("the media link key is not loaded (the task engine is not started)")
        digest = hmac.new(self._key, f"{task_id}/{slot}/{expires}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:18]).decode()

    def valid(self, task_id: str, slot: str, expires: str, signature: str) -> bool:
        """True when ``signature`` is this gateway's for the task, slot and expiry (expired or
        not: ``expired`` tells that apart)."""
        if not expires.isdigit() or self._key is None:
            return False
        return hmac.compare_digest(self._sign(task_id, slot, int(expires)), signature)

    @staticmethod
    def expired(expires: str, now: float | None = None) -> bool:
        return int(expires) < (time.time() if now is None else now)

    def expiry(self, now: float | None = None) -> int:
        ttl = self._gateway.config.tasks.media_link_ttl_s
        return math.ceil(((time.time() if now is None else now) + ttl) / _HOUR) * _HOUR

    def link(self, base: str, task_id: str, slot: str, ext: str) -> str:
        expires = self.expiry()
        name = f"{slot}.{ext}" if ext else slot
        return (f"{base.rstrip('/')}{MEDIA_PATH}/{task_id}/{name}?expires={expires}"
                f"&signature={self._sign(task_id, slot, expires)}")

    # --- what clients see ------------------------------------------------------------------------
    def base_of(self, request: Request | None) -> str | None:
        """Where clients reach the gateway: ``tasks.public_url``, else the request's address."""
        configured = self._gateway.config.tasks.public_url
        if configured:
            return configured.rstrip("/")
        return None if request is None else str(request.base_url).rstrip("/")

    def links(self, family: TaskFamily | None, task: TaskRecord, base: str | None) -> dict[str, str]:
        """The client's link of each result file: upstream link -> gateway link (empty when the
        upstream keeps its own links, or no base is known)."""
        items = items_of(family, task)
        if not items or base is None or self._key is None:
            return {}
        upstream = next((u for u in self._gateway.config.upstreams if u.name == task.upstream), None)
        if upstream is not None and upstream.media_links == "upstream":
            # The upstream's links as it gave them; a path of its API as its whole URL.
            pool = self._gateway.upstreams
            return {item.source: str(Destination(*pool.locate(upstream, item.source)).url)
                    for item in items.values() if item.source.startswith("/")}
        return {item.source: self.link(base, task.task_id, slot, item.ext) for slot, item in items.items()}

    def shown(self, family: TaskFamily | None, task: TaskRecord, base: str | None) -> TaskRecord:
        """``task`` with each upstream link in its ``result_json`` swapped for the gateway's."""
        swap = self.links(family, task, base)
        if not swap or not task.result_json:
            return task
        result = _swap(orjson.loads(task.result_json), swap)
        return msgspec.structs.replace(task, result_json=orjson.dumps(result).decode())


def _swap(value: Any, swap: Mapping[str, str]) -> Any:
    """``value`` (decoded JSON) with every string that is a key of ``swap`` replaced."""
    if isinstance(value, str):
        return swap.get(value, value)
    if isinstance(value, list):
        return [_swap(v, swap) for v in value]
    if isinstance(value, dict):
        return {k: _swap(v, swap) for k, v in value.items()}
    return value
