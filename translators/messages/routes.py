"""The family's two endpoints: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

``count_tokens`` forwards the request to an upstream of the model that speaks this protocol, whose
exact count is the answer; when none offers one, the gateway's estimator (``gateway.relay.tokens``, a
deliberate over-estimate) answers instead. ``X-Gateway-Token-Count`` says which
(``gateway.relay.token_count``); nothing is charged either way. The caller must be allowed the model
(401/403/404 exactly as for ``/v1/messages``); ``max_tokens`` is not required there.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    RequestView,
    UpstreamCall,
    documented,
    endpoint,
    get_gateway,
    read_json_body,
    request_id,
    serve_generate,
)
from gateway.api.relay import (
    Target,
    admit_call,
    count_answer,
    estimate_request_tokens,
    off_process,
    upstream_count,
)
from translators.messages import fastpath
from translators.messages import request as request_decoder
from translators.messages.client import MESSAGES, beta_header
from translators.messages.stream_decode import PROTOCOL
from translators.messages.wire import MessagesRequest

COUNT_PATH = "/v1/messages/count_tokens"


@documented("Create a message", request=MessagesRequest, stream=True)
async def create_message(request: Request) -> Response:
    return await serve_generate(request, MESSAGES)


@endpoint("messages")
@documented("Count the tokens of a message request", request=MessagesRequest)
async def count_tokens(request: Request) -> Response:
    gateway = get_gateway(request)
    principal = await gateway.auth.authenticate(request, "messages")
    body = await read_json_body(request)
    # Decoded and counted in the app's body process when large (gateway.relay.offload): only the two
    # figures come back, the time and the memory of the decoding stay there.
    model, tokens = await off_process(request, len(body), _count, body)
    gateway.catalogue.check(principal, model)
    await admit_call(gateway, principal)  # free, but rate-limited like any call
    beta, view = beta_header(request.headers), RequestView(model=model)

    def call(target: Target) -> UpstreamCall:  # the client's bytes, as the fast path sends them
        same = fastpath.fast_request(body, view, target.upstream_model, beta)
        return msgspec.structs.replace(same, path=COUNT_PATH)

    exact = await upstream_count(gateway.upstreams, model, PROTOCOL, request_id(request), call, _read)
    return count_answer("input_tokens", tokens, exact)


class _Counted(msgspec.Struct):
    input_tokens: int


def _read(body: bytes) -> int | None:
    try:
        return msgspec.json.decode(body, type=_Counted).input_tokens
    except msgspec.DecodeError:
        return None


def _count(body: bytes) -> tuple[str, int]:
    canonical = request_decoder.decode(body, require_max_tokens=False)
    return canonical.model, estimate_request_tokens(canonical)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/messages", create_message, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
