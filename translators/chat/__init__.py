"""The chat-compatible family (OpenAI wire format), both sides.

Modules, one job each:

* ``wire``: msgspec Structs of what we read (client requests, upstream views); ``wire_out``: what we write;
* ``request``: chat client body -> validated ``ChatRequest``; ``response``: ``ChatResponse`` ->
  ``chat.completion`` and canonical events -> ``chat.completion.chunk`` SSE;
* ``frontend``: ``ChatFrontend`` (``/v1/chat/completions``); ``completions``: ``CompletionsFrontend``
  (legacy ``/v1/completions``, spec 4.3); ``embeddings``: ``ChatEmbeddingFrontend`` (spec 4.5);
* ``fastpath``: same-format relaying (bytes through, usage read on the way, usage chunk dropped
  when the client did not ask for it);
* ``adapter``: the ``chat`` UpstreamAdapter; ``stream_decode``: upstream SSE (parsed by the core's
  ``gateway.wire.sse``) -> canonical events;
* ``mapping``: usage, finish reasons, effort; ``validation``: request checks beyond the Structs
  (decoding with field-naming 400s is the core's ``gateway.wire.decode``, data URLs its
  ``gateway.wire.data_url``);
* ``routes``: the endpoints (``models_routes``: ``GET /v1/models``); ``family``: the paths, the
  Bearer credential and the error envelope, as the core asks for them (``WireFamily``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.chat.adapter import ChatAdapter
from translators.chat.family import WIRE_FAMILY

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.chat import models_routes
    from translators.chat.routes import routes

    return [*routes(), *models_routes.routes()]


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [ChatAdapter()]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]
