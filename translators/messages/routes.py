"""The family's two endpoints: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``.

``count_tokens`` is answered offline with the gateway's token estimator (``gateway.tokens``): no
upstream is called and nothing is charged. The figure is the estimator's deliberate
over-estimate, not a vendor tokenizer's count. The caller must be allowed the model (401/403/404
exactly as for ``/v1/messages``); ``max_tokens`` is not required there.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.http import endpoint, get_gateway, json_response, read_json_body
from gateway.offload import off_process
from gateway.openapi import documented
from gateway.ratelimit import admit_call
from gateway.tokens import estimate_request_tokens
from translators.messages import request as request_decoder
from translators.messages.client import MESSAGES
from translators.messages.wire import MessagesRequest


@documented("Create a message", request=MessagesRequest, stream=True)
async def create_message(request: Request) -> Response:
    from gateway.relay import serve_generate  # the pipeline imports the plugins, not the reverse

    return await serve_generate(request, MESSAGES)


@endpoint("messages")
@documented("Count the tokens of a message request", request=MessagesRequest)
async def count_tokens(request: Request) -> Response:
    gateway = get_gateway(request)
    principal = await gateway.auth.authenticate(request, "messages")
    body = await read_json_body(request)
    # Decoded and counted in the app's body process when large (gateway.offload): only the two
    # figures come back, the time and the memory of the decoding stay there.
    model, tokens = await off_process(request, len(body), _count, body)
    gateway.catalogue.check(principal, model)
    await admit_call(gateway, principal)  # free, but rate-limited like any call
    return json_response({"input_tokens": tokens})


def _count(body: bytes) -> tuple[str, int]:
    canonical = request_decoder.decode(body, require_max_tokens=False)
    return canonical.model, estimate_request_tokens(canonical)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/messages", create_message, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
