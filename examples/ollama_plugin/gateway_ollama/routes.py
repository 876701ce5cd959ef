"""The family's endpoints: ``/api/chat``, ``/api/generate``, ``/api/embed``, ``/api/embeddings``
(through the core pipeline, ``gateway.api.serve_generate``) and ``/api/tags`` (the models the key may use)."""

from __future__ import annotations

from gateway.api import ModelConfig, endpoint, get_gateway, json_response, serve_embeddings, serve_generate
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway_ollama import wire
from gateway_ollama.embeddings import EmbedFrontend, LegacyEmbeddingsFrontend
from gateway_ollama.frontend import FAMILY, OllamaFrontend
from gateway_ollama.mapping import created_at

# One object each: frontends hold no per-request state.
CHAT = OllamaFrontend("chat")
GENERATE = OllamaFrontend("generate")
EMBED = EmbedFrontend()
LEGACY_EMBEDDINGS = LegacyEmbeddingsFrontend()


@endpoint(FAMILY)
async def chat(request: Request) -> Response:
    return await serve_generate(request, CHAT)


@endpoint(FAMILY)
async def generate(request: Request) -> Response:
    return await serve_generate(request, GENERATE)


@endpoint(FAMILY)
async def embed(request: Request) -> Response:
    return await serve_embeddings(request, EMBED)


@endpoint(FAMILY)
async def embeddings(request: Request) -> Response:
    return await serve_embeddings(request, LEGACY_EMBEDDINGS)


def _tag(model: ModelConfig) -> wire.TagModel:
    # The gateway knows no file size, digest or quantisation of a model it routes; Ollama's shape
    # is kept with neutral values so clients that read it do not break.
    return wire.TagModel(name=model.id, model=model.id, modified_at=created_at(model.created), size=0,
                         digest="", details=wire.ModelDetails(family=model.owned_by))


@endpoint(FAMILY)
async def tags(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, FAMILY)
    return json_response(wire.Tags(models=[_tag(m) for m in gw.catalogue.visible(principal)]))


def routes() -> list[BaseRoute]:
    return [
        Route("/api/chat", chat, methods=["POST"]),
        Route("/api/generate", generate, methods=["POST"]),
        Route("/api/embed", embed, methods=["POST"]),
        Route("/api/embeddings", embeddings, methods=["POST"]),
        Route("/api/tags", tags, methods=["GET"]),
    ]
