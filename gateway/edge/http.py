"""HTTP helpers every route module uses: the request id, error and JSON responses, body reading,
body decoding with field-naming errors, and the ``endpoint`` wrapper.

A route handler of a family registered as ``"myfamily"`` is written as::

    @endpoint("myfamily")
    async def create(request: Request) -> Response:
        gateway = get_gateway(request)
        principal = await gateway.auth.authenticate(request, "myfamily")
        body = await read_json_body(request)
        ...

Any ``GatewayError`` it raises becomes the family's error envelope (rendered by the family object
the running gateway's ``FamilyRegistry`` holds) with the error's status; any other exception goes
to the ``gateway_handle_exception`` hook (500, no stack trace in the body).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.relay.families import FamilyRegistry, render_default_error
from gateway.relay.offload import check_elements
from gateway.runtime.errors import GatewayError, InvalidRequest, RequestTooLarge
from gateway.runtime.observe import note_error
from gateway.wire.decode import decode_body  # re-exported: the one field-naming decoder
from gateway.wire.json_shape import ElementTally

if TYPE_CHECKING:
    from gateway.runtime.context import Gateway

__all__ = [
    "REQUEST_ID_HEADER",
    "decode_body",
    "endpoint",
    "error_response",
    "families_of",
    "get_gateway",
    "handle_unexpected",
    "internal_error_response",
    "json_response",
    "new_request_id",
    "path_error_response",
    "read_json_body",
    "request_id",
]

REQUEST_ID_HEADER = "X-Service-Request-Id"
JSON_MEDIA_TYPE = "application/json"
CLIENT_CLOSED = 499

# The logger of unexpected errors (the built-in ``gateway_handle_exception``).
error_log = logging.getLogger("gateway.runtime.errors")

Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")


def new_request_id() -> str:
    """``req_`` + 32 hex characters: the time in milliseconds (12) then 10 random bytes (20).

    Time first, as in UUIDv7 or ULID, so that the ids a process hands out sort by time and the
    request log's index on them grows at its end (random ids would make every logged call write
    a page of its own to that index in each commit). 80 random bits keep ids unique across
    processes and replicas within one millisecond."""
    return f"req_{time.time_ns() // 1_000_000:012x}{os.urandom(10).hex()}"


# The scope key under which the app's outer layer notes when a request came in (``time.perf_counter()``,
# set by ``gateway.edge.deadlines.BodyDeadlineMiddleware``); without it (a bare app) it reads as "now".
ARRIVED_SCOPE_KEY = "gateway.arrived"
# The scope key under which ``read_json_body`` keeps the body it read, for any later reader.
BODY_SCOPE_KEY = "gateway.body"
# The scope key of the Gateway serving the request (``get_gateway``), set by ``EdgeMiddleware``.
GATEWAY_SCOPE_KEY = "gateway.instance"


def arrived(request: Request) -> float:
    """When the request came in: as the app's middleware first saw it, before its handler ran."""
    at = request.scope.get(ARRIVED_SCOPE_KEY)
    return at if isinstance(at, float) else time.perf_counter()


def request_id(request: Request) -> str:
    """The id the request-id middleware gave this request (made here if the app runs without it,
    e.g. in a unit test, and then stored so every later call agrees)."""
    state = request.scope.setdefault("state", {})
    rid = state.get("request_id")
    if not isinstance(rid, str):
        rid = state["request_id"] = new_request_id()
    return rid


def get_gateway(request: Request) -> Gateway:
    """The running Gateway of the app that serves ``request``: the one ``EdgeMiddleware`` put in
    the scope (a dict lookup, where ``app.state`` goes through Starlette's ``State.__getattr__``,
    about 0.6 us, asked several times a call), else the app's (an app without that middleware)."""
    gateway: Gateway | None = request.scope.get(GATEWAY_SCOPE_KEY)
    if gateway is None:
        gateway = request.app.state.gateway
    return gateway


def families_of(request: Request) -> FamilyRegistry | None:
    """The families of the gateway serving ``request``; None for a bare app (a unit test)."""
    gateway: Gateway | None = getattr(request.app.state, "gateway", None)
    return gateway.families if gateway is not None else None


def json_response(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """A JSON response serialised with orjson (msgspec Structs, dataclasses and numbers alike)."""
    return Response(orjson.dumps(obj, default=_default), status_code=status, headers=headers,
                    media_type=JSON_MEDIA_TYPE)


_SEND_SLICE = 1024 * 1024


class _ThenResponse(Response):
    """A Response that calls ``then`` once it has been handed to the server, or its sending failed."""

    def __init__(self, body: bytes, media_type: str, then: Callable[[], None]) -> None:
        super().__init__(body, media_type=media_type)
        self._then = then

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._then()


def body_response(body: bytes, media_type: str = JSON_MEDIA_TYPE, *,
                  then: Callable[[], None] | None = None) -> Response:
    """``body`` as a 200 response; a large one is handed to the server a slice at a time, under its
    full Content-Length: the server copies what it is given while holding the GIL, and one copy
    of a large answer would hold every other request for as long.

    ``then`` (a metered call's bookkeeping) runs right after the answer is handed to the server,
    whether or not that succeeds, so that the answer does not wait for it: nothing else runs on
    the event loop in between, so a request that follows the answer still sees what ``then``
    wrote. Before a large answer, which is sent over several turns of the loop, it runs first."""
    if len(body) <= _SEND_SLICE:
        if then is None:
            return Response(body, media_type=media_type)
        return _ThenResponse(body, media_type, then)
    if then is not None:
        then()

    async def slices() -> AsyncIterator[bytes]:
        view = memoryview(body)
        for start in range(0, len(body), _SEND_SLICE):
            yield bytes(view[start:start + _SEND_SLICE])

    return StreamingResponse(slices(), media_type=media_type, headers={"content-length": str(len(body))})


def _default(obj: Any) -> Any:
    if isinstance(obj, msgspec.Struct):
        return msgspec.to_builtins(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def error_response(family: str, err: GatewayError, request: Request | None = None) -> Response:
    """``err`` in the envelope of the family named ``family``, as the gateway serving ``request``
    registered it; the gateway's own envelope for a name no family has (or without a gateway).
    The request id header is added by the middleware."""
    families = families_of(request) if request is not None else None
    body = families.render(family, err) if families is not None else render_default_error(err)
    note_error(err.code, err.message)
    return Response(body, status_code=err.status, media_type=JSON_MEDIA_TYPE)


def path_error_response(request: Request, err: GatewayError) -> Response:
    """``err`` in the envelope of the family that owns the request's path (routing errors)."""
    families = families_of(request)
    path = request.url.path
    body = families.render_for_path(path, err) if families is not None else render_default_error(err)
    note_error(err.code, err.message)
    return Response(body, status_code=err.status, media_type=JSON_MEDIA_TYPE)


async def read_json_body(request: Request) -> bytes:
    """The whole request body; InvalidRequest when it is empty or holds more JSON elements than
    ``limits.json_max_elements`` (``gateway.relay.offload.check_elements``). The body-limit middleware
    raises RequestTooLarge from here when the body grows past its limit. The body is read once
    (``Request.stream``) and kept in the scope: a second call gets the same bytes."""
    tally = ElementTally()
    body = request.scope.get(BODY_SCOPE_KEY)
    if isinstance(body, bytes):
        tally.feed(body)
    else:
        chunks: list[bytes] = []
        async for chunk in request.stream():  # ClientDisconnect when the client hangs up
            if chunk:
                tally.feed(chunk)  # a chunk at a time: no pass over a whole large body on the loop
                chunks.append(chunk)
        body = b"".join(chunks)  # one chunk (the usual case) is returned as it is, not copied
        request.scope[BODY_SCOPE_KEY] = body
    if not body or body.isspace():
        raise InvalidRequest("The request body is empty; a JSON object is required.")
    await check_elements(request, body, tally.bound)
    return body


def handle_unexpected(request: Request, exc: BaseException, family: str) -> Response:
    """The answer to an exception that is not a GatewayError: the first ``gateway_handle_exception``
    implementation that answers (the built-in one, trylast, always does)."""
    if isinstance(exc, ClientDisconnect):
        # The client hung up before its body was read: no bug, and nobody reads an answer. 499
        # (nginx's "client closed request") for the access log; no stack trace for anyone to flood.
        return Response(status_code=CLIENT_CLOSED)
    gateway: Gateway | None = getattr(request.app.state, "gateway", None)
    response: Response | None = None
    if gateway is not None:
        response = gateway.plugins.hook.gateway_handle_exception(request=request, exc=exc, family=family)
    if response is None:  # no gateway (bare app in a unit test): still no stack trace
        response = internal_error_response(request, exc, family)
    return response


def internal_error_response(request: Request, exc: BaseException, family: str) -> Response:
    """500 in the family's envelope (the built-in ``gateway_handle_exception``). The stack trace goes
    to the log (with the request id, so an operator can find it from what the client saw), never
    into the body."""
    rid = request_id(request)
    error_log.error("unhandled error in %s %s [%s]", request.method, request.url.path, rid,
                    exc_info=(type(exc), exc, exc.__traceback__))
    err = GatewayError(f"The server had an error while processing your request (request id {rid}).")
    return error_response(family, err, request)


def endpoint(family: str) -> Callable[[Handler], Handler]:
    """Wrap a handler so that it always answers in ``family``'s envelope: a GatewayError becomes
    its status and code, anything else a 500 through ``gateway_handle_exception``."""

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def wrapped(request: Request) -> Response:
            try:
                return await handler(request)
            except GatewayError as err:
                return error_response(family, err, request)
            except Exception as exc:  # the one place unexpected errors are answered
                return handle_unexpected(request, exc, family)

        return wrapped

    return wrap


async def drain(request: Request) -> None:
    """Read and drop what is left of the body (nothing is kept), so that an early answer can be
    read by a client still sending; the body-limit middleware bounds how much that can be."""
    with contextlib.suppress(ClientDisconnect, RuntimeError, RequestTooLarge):
        async for _ in request.stream():
            pass
