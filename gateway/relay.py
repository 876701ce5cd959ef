"""The text pipeline shared by every wire family: admit, reserve, route, relay, settle.

A family's route calls ``serve_generate`` (chat-like generation) or ``serve_embeddings`` with its
Frontend. For each candidate upstream, in routing order, the call goes either

* the fast path, when the upstream speaks the client's own format: the client's bytes go up and
  the upstream's bytes come back, with only the fields metering needs read; or
* the translated path: client wire -> canonical -> upstream wire, and back.

A failed attempt (connect error, timeout before the first byte, 429, 5xx) moves on to the next
candidate while nothing has reached the client; an upstream 4xx is relayed in the client's
envelope. Every call ends in exactly one ``CallContext.finish``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
from starlette.requests import Request
from starlette.responses import Response

from gateway.canonical import ChatRequest, ChatResponse, EmbeddingRequest, Usage
from gateway.config import TEXT_PROTOCOLS
from gateway.context import Gateway
from gateway.errors import GatewayError, InvalidRequest, UpstreamError, UpstreamHTTPError
from gateway.http import error_response, get_gateway, read_json_body, request_id
from gateway.records import Principal
from gateway.relay_call import CallContext
from gateway.relay_stream import open_stream
from gateway.tokens import estimate_parts_tokens, estimate_request_tokens, estimate_text_tokens
from gateway.translation import EmbeddingFrontend, Frontend, RequestView, UpstreamCall
from gateway.upstream.pool import Target, UpstreamFailure

T = TypeVar("T")


async def _authenticate(request: Request, family: str) -> Principal:
    """Credentials come first: a caller without a valid key learns nothing about its body."""
    return await get_gateway(request).auth.authenticate(request, family)


def _admit(request: Request, principal: Principal, family: str, model_id: str, stream: bool) -> CallContext:
    gw = get_gateway(request)
    model = gw.catalogue.check(principal, model_id)
    return CallContext(gateway=gw, request_id=request_id(request), principal=principal, model=model,
                       route=request.url.path, family=family, is_stream=stream, started=time.perf_counter())


def _fail(request: Request, family: str, ctx: CallContext | None, err: GatewayError) -> Response:
    if ctx is not None:
        ctx.finish(err.status, "upstream_error" if err.status >= 500 else "client_error", error_code=err.code)
    return error_response(family, err, request)


def _crashed(ctx: CallContext | None) -> None:
    """A bug, not a refusal: the call is still logged and its hold released (the exception goes on
    to ``gateway_handle_exception``, which answers 500)."""
    if ctx is not None:
        ctx.finish(500, "gateway_error", error_code="internal_error")


async def attempt(ctx: CallContext, targets: list[Target],
                  send: Callable[[Target], Awaitable[T]]) -> T:
    """Try ``send`` on the targets in order (wrapping around) for up to ``routing.max_attempts``
    tries; only UpstreamFailure (nothing reached the client yet) moves on to the next one."""
    pool = ctx.gateway.upstreams
    max_attempts = ctx.gateway.config.routing.max_attempts
    last: UpstreamFailure | None = None
    for n in range(max(max_attempts, 1)):
        target = targets[n % len(targets)]
        ctx.attempts += 1
        ctx.upstream = target.name
        try:
            result = await send(target)
        except UpstreamFailure as failure:
            pool.mark_failure(target.name)
            last = failure
            continue
        pool.mark_success(target.name)
        return result
    reason = last.reason if last else "no upstream available"
    raise UpstreamError(f"The upstream failed after {ctx.attempts} attempt(s): {reason}.")


async def relay_error(gw: Gateway, target: Target, response: aiohttp.ClientResponse) -> GatewayError:
    """An upstream's non-retryable 4xx, as an error in the client's envelope."""
    try:
        body = await response.read()
    finally:
        response.release()
    message = gw.upstreams.adapter(target.protocol).error_message(body)
    message = message or f"The upstream answered HTTP {response.status}."
    return UpstreamHTTPError(response.status, message)


def _targets(gw: Gateway, model_id: str) -> list[Target]:
    targets = gw.upstreams.targets(model_id, TEXT_PROTOCOLS)
    if not targets:
        raise UpstreamError(f"No upstream serves the model `{model_id}`.")
    return targets


async def serve_generate(request: Request, frontend: Frontend, *, path_model: str | None = None,
                         stream_hint: bool = False) -> Response:
    family = frontend.family
    ctx: CallContext | None = None
    try:
        principal = await _authenticate(request, family)
        body = await read_json_body(request)
        view = frontend.peek(body, path_model, stream_hint)
        ctx = _admit(request, principal, family, view.model, view.stream)
        targets = _targets(ctx.gateway, view.model)
        canonical: ChatRequest | None = None
        if any(t.protocol != family for t in targets):
            canonical = frontend.decode_request(body, path_model, stream_hint)
        input_estimate = (estimate_request_tokens(canonical) if canonical is not None
                          else view.input_tokens_estimate)
        await ctx.reserve(ctx.worst_case(input_estimate, view.max_tokens, view.candidates))
        if view.stream:
            return await open_stream(ctx, frontend, view, body, canonical, targets, path_model, stream_hint)
        return await _generate_once(ctx, frontend, view, body, canonical, targets, path_model, stream_hint)
    except GatewayError as err:
        return _fail(request, family, ctx, err)
    except Exception:
        _crashed(ctx)
        raise


def build_call(ctx: CallContext, frontend: Frontend, view: RequestView, body: bytes,
               canonical: ChatRequest | None, target: Target) -> UpstreamCall:
    if target.protocol == frontend.family:
        return frontend.fast_request(body, view, target.upstream_model)
    assert canonical is not None  # decoded up front whenever a candidate needs translation
    return ctx.gateway.upstreams.adapter(target.protocol).build_request(canonical, target.upstream_model)


async def _generate_once(ctx: CallContext, frontend: Frontend, view: RequestView, body: bytes,
                         canonical: ChatRequest | None, targets: list[Target], path_model: str | None,
                         stream_hint: bool) -> Response:
    gw = ctx.gateway

    async def send(target: Target) -> tuple[Target, bytes]:
        call = build_call(ctx, frontend, view, body, canonical, target)
        response = await gw.upstreams.open(target, call, ctx.request_id)
        if response.status >= 400:
            raise await relay_error(gw, target, response)
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise UpstreamFailure(target.name, f"body read failed ({type(exc).__name__})") from exc
        finally:
            response.release()
        ctx.mark_first_byte()
        return target, data

    target, data = await attempt(ctx, targets, send)
    public = ctx.model.id
    if target.protocol == frontend.family:
        usage = frontend.fast_usage(data)
        out = frontend.fast_response(data, view, public)
        if usage is None:
            canonical = canonical or frontend.decode_request(body, path_model, stream_hint)
            decoded = gw.upstreams.adapter(target.protocol).decode_response(data, canonical)
            usage = estimate_usage(canonical, decoded)
    else:
        assert canonical is not None
        decoded = gw.upstreams.adapter(target.protocol).decode_response(data, canonical)
        decoded.model = public
        usage = decoded.usage
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            usage = decoded.usage = estimate_usage(canonical, decoded)
        out = frontend.encode_response(decoded, canonical)
    ctx.finish(200, "usage_estimated" if usage.estimated else "success", usage)
    return Response(out, media_type="application/json")


def estimate_usage(request: ChatRequest, response: ChatResponse) -> Usage:
    output = sum(estimate_parts_tokens(c.parts) for c in response.candidates)
    return Usage(input_tokens=estimate_request_tokens(request), output_tokens=output, estimated=True)


async def serve_embeddings(request: Request, frontend: EmbeddingFrontend, *,
                           path_model: str | None = None) -> Response:
    family = frontend.family
    ctx: CallContext | None = None
    try:
        principal = await _authenticate(request, family)
        body = await read_json_body(request)
        embed = frontend.decode_embedding_request(body, path_model)
        ctx = _admit(request, principal, family, embed.model, False)
        targets = _targets(ctx.gateway, embed.model)
        input_estimate = sum(estimate_text_tokens(text) for text in embed.inputs)
        if embed.token_inputs:
            input_estimate += sum(len(tokens) for tokens in embed.token_inputs)
            targets = [t for t in targets if t.protocol == family]
            if not targets:
                raise InvalidRequest("Token-id `input` can only be embedded by an upstream of this API's own "
                                     f"format, and none serves `{embed.model}`; send text instead.",
                                     param="input")
        await ctx.reserve(ctx.worst_case(input_estimate, 0))
        return await _embed_once(ctx, frontend, embed, body, targets, input_estimate)
    except GatewayError as err:
        return _fail(request, family, ctx, err)
    except Exception:
        _crashed(ctx)
        raise


async def _embed_once(ctx: CallContext, frontend: EmbeddingFrontend, embed: EmbeddingRequest, body: bytes,
                      targets: list[Target], input_estimate: int) -> Response:
    gw = ctx.gateway

    async def send(target: Target) -> tuple[Target, bytes]:
        if target.protocol == frontend.family:
            call = frontend.fast_embedding_request(body, embed, target.upstream_model)
        else:
            call = gw.upstreams.adapter(target.protocol).build_embedding_request(embed, target.upstream_model)
        response = await gw.upstreams.open(target, call, ctx.request_id)
        if response.status >= 400:
            raise await relay_error(gw, target, response)
        try:
            return target, await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise UpstreamFailure(target.name, f"body read failed ({type(exc).__name__})") from exc
        finally:
            response.release()

    target, data = await attempt(ctx, targets, send)
    if target.protocol == frontend.family:
        out, usage = frontend.fast_embedding_response(data, embed, ctx.model.id)
    else:
        decoded = gw.upstreams.adapter(target.protocol).decode_embedding_response(data, embed)
        decoded.model = ctx.model.id
        usage = decoded.usage
        out = frontend.encode_embedding_response(decoded, embed)
    if usage is None or usage.input_tokens == 0:
        usage = Usage(input_tokens=input_estimate, estimated=True)
    # Embeddings are billed by prompt tokens only (spec section 8).
    usage = Usage(input_tokens=usage.input_tokens, estimated=usage.estimated)
    ctx.finish(200, "usage_estimated" if usage.estimated else "success", usage)
    return Response(out, media_type="application/json")
