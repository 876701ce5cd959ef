"""A test kit for plugin authors: a family's pieces driven without a server, the way the gateway
drives them, and the plugin manager the gateway would build with the plugin in it.

    from gateway.api.testing import client_call, decode_stream, plugin_manager

    call = client_call(MyFrontend(), b'{"model": "m", "prompt": "hi"}')
    request = call.canonical()                             # the frontend's decode, once
    events, complete = decode_stream(MyAdapter().stream_decoder(request, limits()), raw, chunk_size=1)

For a test over HTTP, start ``gateway serve`` (or ``gateway.edge.app.create_app`` in the gateway's
own suite) with the plugin installed, and the simulator with its side (``python -m
gateway_simulator``): see ``tests/plugins`` for the Ollama example's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pluggy
from starlette.requests import Request

from gateway.hooks.manager import collect_adapters, collect_families, make_plugin_manager
from gateway.relay.call import ClientCall
from gateway.relay.canonical import StreamEvent
from gateway.relay.families import FamilyRegistry
from gateway.relay.translation import Frontend, ProtocolAdapter, StreamDecoder, StreamEncoder
from gateway.settings.config import LimitsConfig

__all__ = ["adapters", "chunked", "client_call", "decode_stream", "encode_stream", "families", "limits",
           "plugin_manager"]


def chunked(data: bytes, size: int) -> list[bytes]:
    """``data`` cut every ``size`` bytes: a stream as a network may deliver it."""
    return [data[i:i + size] for i in range(0, len(data), size)]


def decode_stream(decoder: StreamDecoder, data: bytes, chunk_size: int = 1) -> tuple[list[StreamEvent], bool]:
    """The canonical events of an upstream stream fed ``chunk_size`` bytes at a time, and whether
    it ended cleanly (the decoder's ``complete`` after ``close``)."""
    events: list[StreamEvent] = []
    for chunk in chunked(data, chunk_size):
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events, decoder.complete


def encode_stream(encoder: StreamEncoder, events: Iterable[StreamEvent]) -> bytes:
    """The client's stream bytes for ``events``, its ending included."""
    return b"".join(encoder.encode(event) for event in events) + encoder.close()


def client_call(frontend: Frontend, body: bytes, *, path: str = "/", headers: Mapping[str, str] | None = None,
                query: str = "", path_model: str | None = None, stream_hint: bool = False) -> ClientCall:
    """One client request as the relay hands it to ``frontend``: peeked (``call.view``), and
    decoded on ``call.canonical()``. ``InvalidRequest`` comes out of the peek as it would."""
    scope: dict[str, Any] = {
        "type": "http", "method": "POST", "path": path, "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    view = frontend.peek(body, path_model, stream_hint)
    return ClientCall(frontend, body, view, Request(scope), path_model=path_model, stream_hint=stream_hint)


def limits(**overrides: Any) -> LimitsConfig:
    """The ``limits`` section with the defaults, or with ``overrides`` (``sse_event_bytes=...``)."""
    return LimitsConfig(**overrides)


def plugin_manager(*plugins: object) -> pluggy.PluginManager:
    """The gateway's plugin manager with the built-ins and ``plugins`` (modules or objects), no
    entry points: a misspelt hook name fails here as it would at start-up."""
    return make_plugin_manager(load_entrypoints=False, extra_plugins=plugins)


def families(*plugins: object) -> FamilyRegistry:
    """The wire families the gateway would serve with ``plugins`` registered after the built-ins."""
    return collect_families(plugin_manager(*plugins))


def adapters(*plugins: object) -> dict[str, ProtocolAdapter]:
    """The upstream adapter of each protocol with ``plugins`` registered after the built-ins."""
    return collect_adapters(plugin_manager(*plugins))
