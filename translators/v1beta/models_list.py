"""``GET /v1beta/models`` and ``GET /v1beta/models/{model}`` in the family's own shape.

The same allowlist rule as ``/v1/models`` (spec 4.1): only the models the calling key may use are
listed, and any other id reads as absent (404), so a key cannot probe the catalogue. The config has
no model kind, so a model whose id mentions ``embed`` is listed with the embedding methods.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.api import InvalidRequest, ModelConfig, ModelNotFound, endpoint, get_gateway, json_response

GENERATE_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]
EMBED_METHODS = ["embedContent", "batchEmbedContents"]
_DEFAULT_PAGE, _MAX_PAGE = 50, 1000


def is_embedding_model(model_id: str) -> bool:
    return "embed" in model_id.lower()


def model_object(model: ModelConfig) -> dict[str, Any]:
    embed = is_embedding_model(model.id)
    return {
        "name": f"models/{model.id}",
        "baseModelId": model.id,
        "version": "001",
        "displayName": model.id,
        "description": f"{model.id}, served by the gateway (owned by {model.owned_by}).",
        "inputTokenLimit": 2048 if embed else 1_048_576,
        "outputTokenLimit": 1 if embed else model.max_output_tokens,
        "supportedGenerationMethods": EMBED_METHODS if embed else GENERATE_METHODS,
    }


def _page(request: Request) -> tuple[int, int]:
    try:
        size = int(request.query_params.get("pageSize") or _DEFAULT_PAGE)
        start = int(request.query_params.get("pageToken") or 0)
    except ValueError as exc:
        raise InvalidRequest("`pageSize` and `pageToken` must be integers.", param="pageToken") from exc
    if size < 1 or start < 0:
        raise InvalidRequest("`pageSize` must be positive and `pageToken` not negative.", param="pageSize")
    return start, min(size, _MAX_PAGE)


@endpoint("v1beta")
async def list_models(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "v1beta")
    start, size = _page(request)
    models = gw.catalogue.visible(principal)
    body: dict[str, Any] = {"models": [model_object(m) for m in models[start:start + size]]}
    if start + size < len(models):
        body["nextPageToken"] = str(start + size)
    return json_response(body)


@endpoint("v1beta")
async def get_model(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "v1beta")
    model_id = request.path_params["model"].removeprefix("models/")
    model = gw.catalogue.model(model_id)
    if model is None or not gw.catalogue.may_call(principal, model_id):
        raise ModelNotFound(f"models/{model_id} is not found for API version v1beta, or you do not have "
                            "access to it.")
    return json_response(model_object(model))
