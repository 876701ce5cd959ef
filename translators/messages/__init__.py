"""The message-protocol family (Anthropic Messages wire format), both sides.

Modules, one job each:

* ``wire``: msgspec Structs of the wire format (client request, upstream views);
* ``request``: client body -> validated ``ChatRequest`` (and the fast path's ``peek``);
* ``response``: ``ChatResponse`` -> message object; ``stream_encode``: canonical events -> SSE;
* ``upstream``: the ``messages`` UpstreamAdapter; ``stream_decode``: upstream SSE -> canonical events;
* ``fastpath``: same-format relaying (bytes through, usage read on the way);
* ``client``: the ``MessagesFrontend`` tying the client side together; ``routes``: the endpoints;
* ``mapping``: usage and stop-reason conversions shared by both sides;
* ``family``: credential and version headers, paths and the error envelope (``WireFamily``).

Conventions this family adds to the canonical model (documented where they are implemented):
``ChatRequest.extra["anthropic-beta"]`` carries the client's beta header for a messages upstream,
and ``ChatRequest.extra["messages"]`` the top-level fields only this format knows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.messages.family import MessagesFamily
from translators.messages.upstream import MessagesAdapter

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, ProtocolAdapter, WireFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.messages.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[ProtocolAdapter]:
    return [MessagesAdapter()]


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [MessagesFamily()]
