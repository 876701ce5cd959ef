"""``GET /v1/models`` and ``GET /v1/models/{id}``: the models the calling key may use (spec 4.1)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import ModelConfig, ModelNotFound, endpoint, get_gateway, json_response


def _model_object(model: ModelConfig) -> dict[str, object]:
    return {"id": model.id, "object": "model", "created": model.created, "owned_by": model.owned_by}


@endpoint("chat")
async def list_models(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "chat")
    models = gw.catalogue.visible(principal)
    return json_response({"object": "list", "data": [_model_object(m) for m in models]})


@endpoint("chat")
async def get_model(request: Request) -> Response:
    gw = get_gateway(request)
    principal = await gw.auth.authenticate(request, "chat")
    model_id = request.path_params["model_id"]
    model = gw.catalogue.model(model_id)
    # Outside the allowlist reads as absent, so that a key cannot probe the catalogue.
    if model is None or not gw.catalogue.may_call(principal, model_id):
        raise ModelNotFound(f"The model `{model_id}` does not exist or you do not have access to it.")
    return json_response(_model_object(model))


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
    ]
