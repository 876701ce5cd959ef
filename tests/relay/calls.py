"""A ``ClientCall`` for unit tests of a frontend, without an HTTP server."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from gateway.relay.call import ClientCall


def client_call(frontend: Any, body: bytes, *, path_model: str | None = None, stream_hint: bool = False,
                headers: Iterable[tuple[str, str]] = (), query: str = "") -> ClientCall:
    """The per-call object the relay would make for ``body`` sent with ``headers`` and ``query``."""
    scope = {"type": "http", "method": "POST", "path": "/", "query_string": query.encode("latin-1"),
             "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]}
    view = frontend.peek(body, path_model, stream_hint)
    return ClientCall(frontend, body, view, Request(scope), path_model=path_model, stream_hint=stream_hint)


def forwarded(call: ClientCall, upstream_model: str) -> ClientCall:
    """``call`` as the relay leaves it after choosing a same-format upstream that knows the model
    as ``upstream_model`` (see ``gateway.upstream.attempt.build_call``)."""
    call.forwarded = True
    call.upstream_model = upstream_model
    return call
