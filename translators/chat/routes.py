"""The family's generation endpoints: chat completions, legacy completions and embeddings.

The frontends are stateless singletons (per-request state lives in the relay's ``ClientCall``).
``GET /v1/models`` lives in ``translators.chat.models_routes``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import documented, endpoint, serve_embeddings, serve_generate
from translators.chat.completions import COMPLETIONS
from translators.chat.embeddings import EMBEDDINGS
from translators.chat.frontend import CHAT
from translators.chat.wire import ChatCompletionRequest, CompletionRequest, EmbeddingsRequest


@endpoint("chat")
@documented("Create a chat completion", request=ChatCompletionRequest, stream=True)
async def chat_completions(request: Request) -> Response:
    return await serve_generate(request, CHAT)


@endpoint("chat")
@documented("Create a completion (legacy)", request=CompletionRequest, stream=True)
async def completions(request: Request) -> Response:
    return await serve_generate(request, COMPLETIONS)


@endpoint("chat")
@documented("Create embeddings", request=EmbeddingsRequest)
async def embeddings(request: Request) -> Response:
    return await serve_embeddings(request, EMBEDDINGS)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
    ]
