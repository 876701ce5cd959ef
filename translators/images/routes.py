"""The Images family's endpoints: each authenticates, validates (400 naming the field, before any
money is held or upstream asked) and hands the call to ``serve.relay``."""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.api import (
    MULTIPART,
    GatewayError,
    UpstreamCall,
    documented,
    drain,
    endpoint,
    error_response,
    get_gateway,
    read_json_body,
)
from gateway.api.relay import Target
from translators.images.family import EDITS, FAMILY, GENERATIONS
from translators.images.fields import MAX_IMAGES, RESPONSE_FORMATS
from translators.images.generation import GenerationView, parse_generation, upstream_body
from translators.images.serve import relay
from translators.images.upload import EditUpload, read_edit_form
from translators.images.upstream_form import build_edit_call, parse_edit_fields

# The form as it arrives (``upload.EditUpload`` is what it becomes).
EDIT_FORM = {"type": "object", "required": ["image", "prompt", "model"], "properties": {
    "image": {"type": "string", "contentMediaType": "application/octet-stream"},
    "image[]": {"type": "array", "items": {"type": "string", "contentMediaType": "application/octet-stream"}},
    "mask": {"type": "string", "contentMediaType": "application/octet-stream"},
    "model": {"type": "string"}, "prompt": {"type": "string"},
    "n": {"type": "integer", "minimum": 1, "maximum": MAX_IMAGES},
    "response_format": {"enum": list(RESPONSE_FORMATS)}, "size": {"type": "string"}}}


@endpoint(FAMILY)
@documented("Create images from a prompt", request=GenerationView)
async def generations(request: Request) -> Response:
    principal = await get_gateway(request).auth.authenticate(request, FAMILY)
    params, members = parse_generation(await read_json_body(request))

    def build(target: Target) -> UpstreamCall:
        return UpstreamCall(path=GENERATIONS, body=upstream_body(members, target.upstream_model))

    return await relay(request, principal, params, build)


@endpoint(FAMILY)
@documented("Edit images from a prompt", request=EDIT_FORM, media_type=MULTIPART)
async def edits(request: Request) -> Response:
    upload: EditUpload | None = None
    try:
        principal = await get_gateway(request).auth.authenticate(request, FAMILY)
        upload = await read_edit_form(request)
        params = parse_edit_fields(upload)
    except GatewayError as err:
        await drain(request)  # a refused key or field too: the SDK reads an answer only once it sent all
        if upload is not None:
            upload.close()
        return error_response(FAMILY, err, request)
    except ClientDisconnect:  # the caller hung up mid-upload: nothing was held or asked
        if upload is not None:
            upload.close()
        return Response(status_code=499)
    form = upload

    def build(target: Target) -> UpstreamCall:
        return build_edit_call(EDITS, form, target.upstream_model)

    try:
        return await relay(request, principal, params, build)
    finally:
        form.close()


def routes() -> list[BaseRoute]:
    return [Route(GENERATIONS, generations, methods=["POST"]), Route(EDITS, edits, methods=["POST"])]
