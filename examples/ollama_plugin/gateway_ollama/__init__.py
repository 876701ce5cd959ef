"""The Ollama native API for the model gateway, as a third-party plugin.

Installed with pip, it is found through the ``gateway`` entry-point group and adds:

* a client family ``ollama`` (``family``): ``POST /api/chat``, ``/api/generate``, ``/api/embed``,
  ``/api/embeddings`` and ``GET /api/tags``, NDJSON streaming, Ollama's error envelope;
* an upstream protocol ``ollama`` (``upstream``): ``upstreams[].protocol: ollama`` routes any
  client family to an Ollama server;
* its simulator side (``simulator``), so the built-in simulator speaks Ollama too: a plugin of the
  simulator, not of the gateway (the ``gateway_simulator`` entry-point group), loaded only by the
  simulator process.

Modules, one job each: ``wire`` (Structs), ``ndjson`` (line framing), ``mapping`` (stop reasons,
usage, think, images), ``client`` (client requests -> canonical), ``encode`` (canonical ->
answers and streams), ``frontend`` / ``embeddings`` (the Frontends), ``fastpath`` (Ollama to
Ollama), ``stream_decode`` (upstream stream -> canonical), ``routes``, ``family``, ``simulator``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.api import hookimpl

if TYPE_CHECKING:
    from gateway.api import Gateway, UpstreamAdapter, WireFamily
    from starlette.routing import BaseRoute


@hookimpl
def gateway_families() -> list[WireFamily]:
    from gateway_ollama.family import OllamaFamily

    return [OllamaFamily()]


@hookimpl
def gateway_routes(gateway: Gateway) -> list[BaseRoute]:
    from gateway_ollama.routes import routes

    return routes()


@hookimpl
def gateway_upstream_adapters() -> list[UpstreamAdapter]:
    from gateway_ollama.upstream import OllamaAdapter

    return [OllamaAdapter()]
