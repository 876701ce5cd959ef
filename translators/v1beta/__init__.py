"""The third native family (Gemini ``v1beta`` wire format), both sides.

Modules, one job each:

* ``wire``: msgspec Structs of the wire format (camelCase and snake_case field names alike);
* ``client``: client ``generateContent`` body -> validated ``ChatRequest``;
* ``parts``: content parts both ways (function-call ids, thought signatures, function responses);
* ``schema``: Gemini's OpenAPI-subset Schema -> JSON Schema; ``mapping``: finish reasons, usage;
* ``frontend``: the ``V1betaFrontend`` (responses, streams, fast path); ``stream_encode``:
  canonical events -> SSE or JSON-array stream; ``framing``: splitting either stream framing;
* ``upstream``: the ``v1beta`` UpstreamAdapter; ``stream_decode``: upstream stream -> canonical;
* ``fastpath``: same-format relaying (bytes through, usage read on the way);
* ``embeddings``: ``embedContent`` / ``batchEmbedContents``; ``models_list``: model listing;
* ``routes``: the endpoints on ``/v1beta/...`` and ``/v1/models/{model}:{method}``;
* ``family``: credential, paths and the error envelope, as the core asks for them (``WireFamily``).

Conventions this family adds to the canonical model: ``ChatRequest.extra`` keeps
``safetySettings``, ``cachedContent``, ``labels`` and the unmapped part of ``generationConfig``
under their Gemini names; the v1beta upstream adapter sends them on, other adapters ignore them.
A ``thoughtSignature`` on a non-thought part travels as an empty signed ThinkingPart before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.v1beta.family import V1betaFamily
from translators.v1beta.upstream import V1betaAdapter

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.v1beta.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [V1betaAdapter()]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [V1betaFamily()]
