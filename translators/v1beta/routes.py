"""The family's endpoints, on both prefixes.

``/v1beta/models/{model}:{method}`` and ``/v1/models/{model}:{method}`` (what google-genai calls
unless told to use v1beta) take POST; listing (``GET /v1beta/models[/{model}]``) lives under
``/v1beta`` only, since ``GET /v1/models`` belongs to the chat family. Anything else under
``/v1beta`` is a 404 in this family's envelope.

The API key may come in ``x-vendorc-api-key``, ``x-goog-api-key`` or the ``?key=`` query; the
query is never forwarded upstream nor repeated in an answer (the access log redacts it).

``countTokens`` goes to an upstream of the model that speaks this protocol, whose exact count is
the answer; when none offers one the gateway's estimator (``gateway.relay.tokens``) answers instead, and
``X-Gateway-Token-Count`` says which (``gateway.relay.token_count``). No charge; the caller must be
allowed the model.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    NotFound,
    UpstreamCall,
    decode_body,
    documented,
    endpoint,
    get_gateway,
    read_json_body,
    request_id,
    serve_embeddings,
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
from translators.v1beta.client import decode_generate_request, model_from_path
from translators.v1beta.embeddings import EMBED_BATCH, EMBED_ONE
from translators.v1beta.frontend import V1BETA
from translators.v1beta.models_list import get_model, list_models
from translators.v1beta.parts import PROTOCOL
from translators.v1beta.upstream import model_path
from translators.v1beta.wire import BatchEmbedContentsRequest, EmbedContentRequest, GenerateContentRequest

GENERATE = ("generateContent", "streamGenerateContent")
EMBED = ("embedContent", "batchEmbedContents")


class _CountTokensView(msgspec.Struct):
    generateContentRequest: msgspec.Raw | None = None


async def _count_tokens(request: Request, model: str) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "v1beta")
    body = await read_json_body(request)
    # Decoded and counted in the app's body process when large (gateway.relay.offload): only the two
    # figures come back, the time and the memory of the decoding stay there.
    public, tokens = await off_process(request, len(body), _count, body, model)
    gw.catalogue.check(principal, public)
    await admit_call(gw, principal)  # free, but rate-limited like any call

    def call(target: Target) -> UpstreamCall:  # the client's bytes, as the fast path sends them
        return UpstreamCall(path=model_path(target.upstream_model, "countTokens"), body=body)

    exact = await upstream_count(gw.upstreams, public, PROTOCOL, request_id(request), call, _read)
    return count_answer("totalTokens", tokens, exact)


class _Counted(msgspec.Struct):
    totalTokens: int


def _read(body: bytes) -> int | None:
    try:
        return msgspec.json.decode(body, type=_Counted).totalTokens
    except msgspec.DecodeError:
        return None


def _count(body: bytes, model: str) -> tuple[str, int]:
    inner = decode_body(body, _CountTokensView).generateContentRequest
    canonical = decode_generate_request(bytes(inner) if inner is not None else body, model, False)
    return canonical.model, estimate_request_tokens(canonical)


@endpoint("v1beta")
@documented("Generate content", request=GenerateContentRequest, path={"method": "generateContent"})
@documented("Generate content as a stream", request=GenerateContentRequest, stream=True,
            path={"method": "streamGenerateContent"})
@documented("Count tokens", request=GenerateContentRequest, path={"method": "countTokens"})
@documented("Embed content", request=EmbedContentRequest, path={"method": "embedContent"})
@documented("Embed contents in a batch", request=BatchEmbedContentsRequest,
            path={"method": "batchEmbedContents"})
async def model_method(request: Request) -> Response:
    model = model_from_path(request.path_params["model"])
    method = request.path_params["method"]
    if method in GENERATE:
        return await serve_generate(request, V1BETA, path_model=model,
                                    stream_hint=method == "streamGenerateContent")
    if method in EMBED:
        frontend = EMBED_BATCH if method == "batchEmbedContents" else EMBED_ONE
        return await serve_embeddings(request, frontend, path_model=model)
    if method == "countTokens":
        return await _count_tokens(request, model)
    raise NotFound(f"Method `{method}` is not found for models/{model}.")


@endpoint("v1beta")
async def not_found(request: Request) -> Response:
    raise NotFound(f"`{request.method} {request.url.path}` is not a v1beta endpoint.")


def routes() -> list[BaseRoute]:
    return [
        Route("/v1beta/models/{model:path}:{method}", model_method, methods=["POST"]),
        Route("/v1/models/{model:path}:{method}", model_method, methods=["POST"]),
        Route("/v1beta/models", list_models, methods=["GET"]),
        Route("/v1beta/models/{model:path}", get_model, methods=["GET"]),
        # Last: whatever else is under /v1beta gets this family's 404, not the chat envelope.
        Route("/v1beta/{rest:path}", not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
    ]
