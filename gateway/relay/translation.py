"""The two interfaces a wire family implements: a client-facing Frontend and an UpstreamAdapter.

A translator module (``translators/<family>``) provides both for its wire format:

* ``Frontend``: decodes the client's wire request into a ``ChatRequest`` and encodes canonical
  responses and stream events back into the client's wire format. It also knows how to read the
  few fields that metering and routing need straight from the bytes (``peek``), and, optionally,
  how to relay a same-format upstream's bytes as they are (the fast path: ``takes_fast_path``).
* ``UpstreamAdapter``: builds the wire request for an upstream of its protocol from a
  ``ChatRequest`` and decodes that upstream's answers (whole, or streamed) into canonical form.
  It is the text kind of ``ProtocolAdapter``, which every upstream adapter (text or media) is.

Both are pure: no I/O. The core pipeline (``gateway.relay.pipeline``) does the HTTP, metering and routing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, ClassVar, Protocol

import msgspec

from gateway.relay.canonical import (
    ChatRequest,
    ChatResponse,
    EmbeddingRequest,
    EmbeddingResponse,
    StreamEvent,
    Usage,
)

if TYPE_CHECKING:
    from starlette.datastructures import Headers, QueryParams
    from starlette.requests import HTTPConnection

    from gateway.settings.config import LimitsConfig


class RequestView(msgspec.Struct):
    """What the core needs from a request before deciding anything."""

    model: str
    stream: bool = False
    max_tokens: int | None = None
    input_tokens_estimate: int = 0  # an over- rather than under-estimate: it sizes the reservation
    stream_usage: bool = False  # the client asked for usage in its stream
    candidates: int = 1  # answers asked for (``n``, ``candidateCount``): each may use max_tokens


class UpstreamCall(msgspec.Struct):
    """One HTTP request to an upstream, relative to its ``base_url``."""

    path: str  # the path under ``base_url``, with its query, e.g. "/v2/generate?stream=1"
    # Bytes, or an async iterable of chunks for an upload relayed as it is read (never whole in memory).
    body: bytes | AsyncIterable[bytes]
    headers: dict[str, str] = {}


class StreamDecoder(Protocol):
    """Turns an upstream's raw stream bytes (any chunking) into canonical events."""

    def feed(self, chunk: bytes) -> list[StreamEvent]: ...

    def close(self) -> list[StreamEvent]:
        """End of the byte stream: flush, and report whether it ended cleanly via ``complete``."""
        ...

    @property
    def complete(self) -> bool:
        """True once the upstream sent its terminal event (``[DONE]``, ``message_stop``, ...)."""
        ...


class StreamEncoder(Protocol):
    """Turns canonical events into the client's wire stream bytes."""

    content_type: str

    def encode(self, event: StreamEvent) -> bytes: ...

    def close(self) -> bytes:
        """Bytes that end the stream (``data: [DONE]``, ``]``...), possibly empty."""
        ...

    def error(self, status: int, code: str, message: str) -> bytes:
        """An in-band error event for a stream that already started."""
        ...


class FastPathStream(Protocol):
    """Watches a same-format upstream stream as it is relayed: reads usage, may drop bytes."""

    def feed(self, chunk: bytes) -> bytes:
        """Returns the bytes to send to the client for this chunk (usually ``chunk`` itself)."""
        ...

    def close(self) -> bytes: ...

    @property
    def usage(self) -> Usage | None: ...

    @property
    def complete(self) -> bool: ...


class ClientCall:
    """One client generation request, as every attempt and the frontend see it."""

    __slots__ = ("_canonical", "_client", "body", "fast_stream", "forwarded", "frontend", "path_model",
                 "public_model", "stream_hint", "translated", "upstream_model", "view")

    def __init__(self, frontend: Frontend, body: bytes, view: RequestView, client: HTTPConnection, *,
                 path_model: str | None = None, stream_hint: bool = False) -> None:
        self.frontend = frontend
        self.body = body
        self.view = view
        self._client = client
        self.path_model = path_model  # the model named in the path, for families that put it there
        self.stream_hint = stream_hint  # the endpoint itself says "stream" (not a body field)
        # The model id the answer names: the one asked for, or the fallback model that serves the
        # call (``gateway.relay.fallback``); a fast path restores it where the upstream names another.
        self.public_model = view.model
        self._canonical: ChatRequest | None = None
        # Set when a same-format upstream is sent the client's bytes: which model id it was asked
        # for (to restore the public one in its answer), and that the strict decoder is then only
        # wanted for an estimate, so a frontend may decode leniently.
        self.forwarded = False
        self.upstream_model: str | None = None
        self.fast_stream: FastPathStream | None = None  # the fast-path stream watcher, once one relays
        # The upstream requests built from the canonical one, by (protocol, upstream model): built
        # once, off the event loop for a large body (``relay.serve_generate``), reused by retries.
        self.translated: dict[tuple[str, str], UpstreamCall] = {}

    def canonical(self) -> ChatRequest:
        """The canonical request, decoded on first use only."""
        if self._canonical is None:
            self._canonical = self.frontend.decode_request(self)
        return self._canonical

    @property
    def headers(self) -> Headers:
        """The client's request headers (for a family's request options: beta tags, ...)."""
        return self._client.headers

    @property
    def query(self) -> QueryParams:
        """The client's query parameters (parsed on first use only)."""
        return self._client.query_params

    @property
    def decoded(self) -> ChatRequest | None:
        """The canonical request if something already decoded it (never decodes)."""
        return self._canonical


class Frontend(ABC):
    """The client-facing side of a wire family: subclass it. Stateless: one object serves every
    request; what one request needs is in its ``ClientCall``.

    A family writes only its translation (``peek``, ``decode_request``, ``encode_response``,
    ``stream_encoder``). The same-format fast path (the four ``fast_*`` methods: the client's bytes
    sent as they are to an upstream of the family's own protocol) is optional: a subclass that
    defines none of them is served through translation on such an upstream too (its adapter turns
    the canonical request back into the family's wire). One that defines them defines all four."""

    family: str  # the wire family's name, e.g. "chat"
    has_fast_path: ClassVar[bool] = False  # set for each subclass from the methods it defines

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.has_fast_path = _defines_all(cls, Frontend, _FAST_METHODS)

    @abstractmethod
    def peek(self, body: bytes, path_model: str | None, stream_hint: bool) -> RequestView:
        """Minimal decode for auth/metering/routing; raises InvalidRequest on malformed input."""

    @abstractmethod
    def decode_request(self, call: ClientCall) -> ChatRequest:
        """Full decode and validation; raises InvalidRequest naming the field. Called at most once
        per call (through ``call.canonical()``); after ``call.forwarded`` it may be lenient."""

    @abstractmethod
    def encode_response(self, response: ChatResponse, request: ChatRequest) -> bytes: ...

    @abstractmethod
    def stream_encoder(self, request: ChatRequest, call: ClientCall) -> StreamEncoder: ...

    # --- optional: the same-format fast path (see ``takes_fast_path``) ----------------------

    def fast_request(self, call: ClientCall) -> UpstreamCall:
        """The upstream call for the client's own bytes (for ``call.upstream_model``), changing only
        what must change (the model id when aliased, asking the upstream for stream usage)."""
        raise NotImplementedError(f"{type(self).__name__} has no fast path")

    def fast_usage(self, body: bytes) -> Usage | None:
        """Usage from a same-format, non-streamed upstream answer body."""
        raise NotImplementedError(f"{type(self).__name__} has no fast path")

    def fast_stream(self, call: ClientCall, limits: LimitsConfig) -> FastPathStream:
        """The watcher of one same-format stream; what it holds of an unfinished event or element
        stays within ``limits`` (``gateway.wire.frames``)."""
        raise NotImplementedError(f"{type(self).__name__} has no fast path")

    def fast_response(self, body: bytes, call: ClientCall, public_model: str) -> bytes:
        """The upstream's body as sent to the client (model id restored when aliased)."""
        raise NotImplementedError(f"{type(self).__name__} has no fast path")


class EmbeddingFrontend(ABC):
    """The embeddings side of a wire family: subclass it. The two ``fast_embedding_*`` methods are
    optional, as ``Frontend``'s fast path is (both or neither)."""

    family: str
    has_fast_path: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.has_fast_path = _defines_all(cls, EmbeddingFrontend, _FAST_EMBEDDING_METHODS)

    @abstractmethod
    def decode_embedding_request(self, body: bytes, path_model: str | None) -> EmbeddingRequest:
        """Full decode and validation; raises InvalidRequest naming the field."""

    @abstractmethod
    def encode_embedding_response(self, response: EmbeddingResponse, request: EmbeddingRequest) -> bytes: ...

    def fast_embedding_request(self, body: bytes, request: EmbeddingRequest,
                               upstream_model: str) -> UpstreamCall:
        raise NotImplementedError(f"{type(self).__name__} has no fast path")

    def fast_embedding_response(self, body: bytes, request: EmbeddingRequest,
                                public_model: str) -> tuple[bytes, Usage | None]:
        """A same-format upstream's answer as sent to the client, and the usage it reports."""
        raise NotImplementedError(f"{type(self).__name__} has no fast path")


_FAST_METHODS = ("fast_request", "fast_usage", "fast_stream", "fast_response")
_FAST_EMBEDDING_METHODS = ("fast_embedding_request", "fast_embedding_response")


def _defines_all(cls: type, base: type, names: tuple[str, ...]) -> bool:
    """Whether ``cls`` overrides every method of ``names`` (False when none; a part is an error)."""
    defined = [name for name in names if getattr(cls, name) is not getattr(base, name)]
    if defined and len(defined) != len(names):
        missing = ", ".join(name for name in names if name not in defined)
        raise TypeError(f"{cls.__name__} defines part of the fast path: add {missing}, or none of them")
    return bool(defined)


def same_format(protocol: str, family: str) -> bool:
    """The one decision of "same format": an upstream whose ``protocol`` is the client family's
    name speaks the client's own wire format (its adapter and the family's frontend are one API)."""
    return protocol == family


def takes_fast_path(frontend: Frontend | EmbeddingFrontend, protocol: str) -> bool:
    """Whether a call of ``frontend`` to an upstream of ``protocol`` sends the client's own bytes:
    the upstream speaks the same format and the frontend has a fast path. Otherwise the call is
    translated, through the canonical model and the protocol's adapter."""
    return frontend.has_fast_path and same_format(protocol, frontend.family)


class ProtocolAdapter(Protocol):
    """What every upstream adapter declares, whatever kind of work it does. Config validation
    accepts exactly the ``protocol`` values of the registered adapters, and routing picks an
    upstream for a kind of work by the ``capabilities`` of its protocol's adapter."""

    protocol: str  # the ``upstreams[].protocol`` value this adapter speaks
    # Kinds of work: "generate" and "embed" (text: the adapter is an ``UpstreamAdapter``), or a
    # media family's own kind such as "task" (the adapter is that family's own interface).
    capabilities: frozenset[str]

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers that carry the upstream's API key."""
        ...


TEXT_CAPABILITIES = frozenset({"generate", "embed"})


class UpstreamAdapter(ProtocolAdapter, Protocol):
    """A text adapter (capabilities among ``TEXT_CAPABILITIES``): generation and embeddings."""

    def build_request(self, request: ChatRequest, upstream_model: str) -> UpstreamCall: ...

    def decode_response(self, body: bytes, request: ChatRequest) -> ChatResponse: ...

    def stream_decoder(self, request: ChatRequest, limits: LimitsConfig) -> StreamDecoder:
        """The decoder of one stream; what it holds of an unfinished event or element stays within
        ``limits`` (``sse_event_bytes``, ``stream_element_bytes``: ``gateway.wire.frames``)."""
        ...

    def build_embedding_request(self, request: EmbeddingRequest, upstream_model: str) -> UpstreamCall: ...

    def decode_embedding_response(self, body: bytes, request: EmbeddingRequest) -> EmbeddingResponse: ...

    def error_message(self, body: bytes) -> str:
        """The human message inside this protocol's error envelope (for relaying upstream 4xx)."""
        ...
