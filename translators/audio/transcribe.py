"""``POST /v1/audio/transcriptions`` and ``/v1/audio/translations`` (spec 4.6): admit, reserve,
read the upload as it streams, relay it to a ``chat`` (OpenAI-wire) upstream, bill per minute.

Order of a call: the key is checked before a byte of the body is read; when the file part begins,
the fields before it are validated and the model admitted, and the longest the file could play
(``billing.reservation_seconds`` of the declared body size) is reserved, so a caller without the
quota is refused before 25 MB are read; after the whole body, every field (those after the file
too) and the file's type are checked, and only then is an upstream called. An error while the body
is still arriving (a wrong key included) is answered after the rest of it was read and dropped
(``gateway.api.drain``): the openai SDK sends its whole body before it reads the answer.
"""

from __future__ import annotations

import time

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from gateway.api import (
    Gateway,
    GatewayError,
    UpstreamCall,
    arrived,
    drain,
    error_response,
    get_gateway,
    request_id,
)
from gateway.api.accounts import Principal
from gateway.api.relay import CallContext, Target, UpstreamAnswer, attempt, read_body
from translators.audio import billing
from translators.audio.family import FAMILY, TRANSCRIPTIONS, TRANSLATIONS
from translators.audio.form import Task, TranscriptionForm, check_format, parse_form
from translators.audio.upload import Upload, read_upload
from translators.audio.upstream_form import build_upload_call

UPSTREAM_PROTOCOL = "chat"  # audio is served by OpenAI-wire upstreams, on their /v1/audio/... paths
_PATHS: dict[Task, str] = {"transcriptions": TRANSCRIPTIONS, "translations": TRANSLATIONS}


def admit(request: Request, principal: Principal, model_id: str, *, stream: bool = False) -> CallContext:
    """A metered call for ``model_id`` (404 unknown, 403 not allowed for this key)."""
    gw = get_gateway(request)
    model = gw.catalogue.check(principal, model_id)
    return CallContext(gateway=gw, request_id=request_id(request), principal=principal, model=model,
                       route=request.url.path, family=FAMILY, is_stream=stream, started=time.perf_counter(),
                       arrived=arrived(request))


def audio_targets(gw: Gateway, model_id: str, endpoint: str) -> list[Target]:
    """The OpenAI-wire upstreams of the model, in routing order."""
    targets = [t for t in gw.upstreams.targets(model_id) if t.protocol == UPSTREAM_PROTOCOL]
    if not targets:
        raise gw.upstreams.unservable(model_id, endpoint)
    return targets


def fail(request: Request, ctx: CallContext | None, err: GatewayError) -> Response:
    if ctx is not None:
        ctx.finish(err.status, "upstream_error" if err.status >= 500 else "client_error", error_code=err.code,
                   error_message=err.message)
    return error_response(FAMILY, err, request)


def _declared_size(request: Request, fallback: int) -> int:
    try:
        return min(int(request.headers.get("content-length", "")), fallback)
    except ValueError:
        return fallback


async def serve_transcription(request: Request, task: Task) -> Response:
    gw = get_gateway(request)
    ctx: CallContext | None = None
    upload: Upload | None = None
    max_file = gw.config.limits.transcription_bytes

    async def on_file(fields: list[tuple[str, str]]) -> None:
        nonlocal ctx
        form = parse_form(fields, complete=False)
        if not form.model:  # the model comes after the file: admitted once the body is read
            return
        ctx = admit(request, principal, form.model)
        seconds = billing.reservation_seconds(_declared_size(request, max_file))
        await ctx.reserve(billing.audio_cost(ctx.prices, seconds, ctx.ratio))

    try:
        principal = await gw.auth.authenticate(request, FAMILY)
        upload = await read_upload(request, max_file, on_file)
        form = parse_form(upload.fields)
        check_format(upload.probe.format, upload.size)
        if ctx is None:  # the model came after the file
            ctx = admit(request, principal, form.model)
            seconds = billing.reservation_seconds(upload.size)
            await ctx.reserve(billing.audio_cost(ctx.prices, seconds, ctx.ratio))
        return await _relay(ctx, task, form, upload)
    except GatewayError as err:
        await drain(request)  # a refused key or field too: the SDK reads an answer only once it sent all
        return fail(request, ctx, err)
    except ClientDisconnect:  # the caller hung up mid-upload: nothing was served, the hold goes back
        if ctx is not None:
            ctx.finish(499, "client_error", error_code="client_disconnect")
        return Response(status_code=499)
    except Exception:
        if ctx is not None:
            ctx.finish(500, "gateway_error", error_code="internal_error")
        raise
    finally:
        if upload is not None:
            upload.close()


async def _relay(ctx: CallContext, task: Task, form: TranscriptionForm, upload: Upload) -> Response:
    def build(target: Target) -> UpstreamCall:
        return build_upload_call(_PATHS[task], form.upstream_fields(task, target.upstream_model), upload)

    async def read(target: Target, response: UpstreamAnswer) -> tuple[bytes, str]:
        return await read_body(target, response), response.headers.get("Content-Type", "application/json")

    targets = audio_targets(ctx.gateway, form.model, ctx.route)
    _, (body, content_type) = await attempt(ctx, targets, build, read)
    seconds = billing.billed_seconds(billing.upstream_seconds(body, content_type), upload.probe)
    ctx.finish(200, "success", charge_nano=billing.audio_cost(ctx.prices, seconds, ctx.ratio))
    return Response(body, media_type=content_type.split(";")[0].strip() or "application/json")
