"""The Responses API (spec 2.5b, 4.4): ``/v1/responses`` with conversation state kept by the
gateway, served by every text upstream.

Modules, one job each:

* ``wire``: what clients send (Structs); ``request``: body -> checked ``ClientRequest``;
* ``items``: conversation items -> canonical request (for chat, messages and v1beta upstreams);
* ``response``: the response object and its output items; ``stream_encode``: canonical events ->
  the Responses event stream;
* ``native``: upstreams that speak the Responses API (the ``responses`` feature of an upstream);
* ``state``: stored turns (the core's documents) and the conversation of ``previous_response_id``;
* ``stream``: the stream transforms and storing the turn before the final event;
* ``pipeline``: ``POST /v1/responses``; ``routes``: all endpoints; ``family``: the WireFamily;
* ``simulator``: the Responses side of the upstream simulator.

An upstream that serves ``/v1/responses`` itself says so in the config, and then gets the
Responses request (built-in tools included) instead of a translated one::

    upstreams:
      - {name: openai, protocol: chat, base_url: https://api.openai.com, api_key: ..., features: [responses]}

State: ``store`` (default true) keeps each turn in the core's documents (kind ``response``), owned
by the caller's user; ``previous_response_id`` continues it on any upstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl
from translators.responses.family import WIRE_FAMILY

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from gateway.api import Gateway, WireFamily


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from translators.responses.routes import routes

    return routes()


@hookimpl
def gateway_families() -> list[WireFamily]:
    return [WIRE_FAMILY]
