"""The text pipeline shared by every wire family: admit, reserve, route, relay, settle.

A family's route calls ``serve_generate`` (chat-like generation) or ``serve_embeddings`` with its
Frontend. For each candidate upstream, in routing order, the call goes either

* the fast path, when the upstream speaks the client's own format: the client's bytes go up and
  the upstream's bytes come back, with only the fields metering needs read; or
* the translated path: client wire -> canonical -> upstream wire, and back.

A failed attempt (connect error, timeout before the first byte, 401, 429, 5xx) moves on to the
next candidate while nothing has reached the client; an upstream 4xx is relayed in the client's
envelope. The attempts themselves (building each upstream call, sending it, mapping aiohttp's
errors) are ``gateway.upstream.attempt``'s, shared with the streaming relay (``relay_stream``);
the request's per-call state is one ``ClientCall``. Every call ends in exactly one
``CallContext.finish``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from gateway.accounts.records import Outcome, Principal
from gateway.edge.http import arrived, body_response, error_response, get_gateway, read_json_body, request_id
from gateway.relay.cache_serve import keep, look_up, serve_hit
from gateway.relay.call import CallContext, ClientCall
from gateway.relay.canonical import ChatRequest, ChatResponse, EmbeddingRequest, Usage
from gateway.relay.client_watch import ClientGone
from gateway.relay.fallback import attempt_models, build_for_model, fallback_headers
from gateway.relay.offload import off_loop
from gateway.relay.replay import cache_headers
from gateway.relay.stream import open_stream
from gateway.relay.tokens import (
    estimate_parts_tokens,
    estimate_request_tokens,
    request_token_bound,
    text_token_bound,
)
from gateway.relay.translation import EmbeddingFrontend, Frontend, takes_fast_path
from gateway.runtime.errors import GatewayError, InvalidRequest
from gateway.upstream.attempt import attempt, build_call, build_embedding_call, read_body
from gateway.upstream.pool import Target, UpstreamPool


async def _authenticate(request: Request, family: str) -> Principal:
    """Credentials come first: a caller without a valid key learns nothing about its body."""
    return await get_gateway(request).auth.authenticate(request, family)


def _admit(request: Request, principal: Principal, family: str, model_id: str, stream: bool) -> CallContext:
    gw = get_gateway(request)
    model = gw.catalogue.check(principal, model_id)
    return CallContext(gateway=gw, request_id=request_id(request), principal=principal, model=model,
                       route=request.scope["path"], family=family, is_stream=stream,
                       started=time.perf_counter(), arrived=arrived(request), receive=request.receive)


def _fail(request: Request, family: str, ctx: CallContext | None, err: GatewayError) -> Response:
    if ctx is not None:
        outcome: Outcome = ("client_disconnect" if isinstance(err, ClientGone)
                            else "upstream_error" if err.status >= 500 else "client_error")
        ctx.finish(err.status, outcome, error_code=err.code, error_message=err.message)
    return error_response(family, err, request)


def _crashed(ctx: CallContext | None) -> None:
    """A bug, not a refusal: the call is still logged and its hold released (the exception goes on
    to ``gateway_handle_exception``, which answers 500)."""
    if ctx is not None:
        ctx.finish(500, "gateway_error", error_code="internal_error")


def _succeeded(ctx: CallContext, usage: Usage) -> Callable[[], None]:
    """A whole answer's ending, run once it is handed to the server (``body_response``'s ``then``:
    the client does not wait for the request log and the settlement's queueing)."""
    return lambda: ctx.finish(200, "usage_estimated" if usage.estimated else "success", usage)


def _targets(ctx: CallContext, model_id: str, capability: str = "generate") -> list[Target]:
    targets = ctx.gateway.upstreams.targets(model_id, capability=capability)
    if not targets:  # a video model on chat completions: 400, never counted as an upstream failure
        raise ctx.gateway.upstreams.unservable(model_id, ctx.route)
    return targets


async def serve_generate(request: Request, frontend: Frontend, *, path_model: str | None = None,
                         stream_hint: bool = False) -> Response:
    family = frontend.family
    ctx: CallContext | None = None
    try:
        principal = await _authenticate(request, family)
        body = await read_json_body(request)
        # A large body is parsed and counted in a worker thread (gateway.relay.offload): seconds of
        # Python on the event loop would stall every other request.
        view = await off_loop(request, len(body), lambda: frontend.peek(body, path_model, stream_hint))
        ctx = _admit(request, principal, family, view.model, view.stream)
        targets = _targets(ctx, view.model)
        call = ClientCall(frontend, body, view, request, path_model=path_model, stream_hint=stream_hint)
        # The response cache (``gateway.relay.cache_serve``): a hit is answered without an upstream.
        lookup = await look_up(request, ctx, call)
        if lookup is not None and lookup.hit is not None:
            return await serve_hit(request, ctx, call, lookup.hit, lookup)
        # Decoded up front only when some candidate needs translation: it sizes the reservation
        # better than the body's estimate, and a bad request is refused before any upstream sees it.
        # The first such candidate's upstream request is built in the same go, off the event loop
        # for a large body: encoding 100,000 messages is as slow as decoding them.
        translating = [t for t in targets if not takes_fast_path(frontend, t.protocol)]
        input_estimate = view.input_tokens_estimate
        if translating:
            pool = ctx.gateway.upstreams
            input_estimate = await off_loop(request, len(body), lambda: _prepare(call, pool, translating[0]))
        await ctx.reserve(ctx.worst_case(input_estimate, view.max_tokens, view.candidates))
        if view.stream:
            return await open_stream(ctx, call, targets)
        return await _generate_once(request, ctx, call, targets)
    except GatewayError as err:
        return _fail(request, family, ctx, err)
    except Exception:
        _crashed(ctx)
        raise


def _prepare(call: ClientCall, pool: UpstreamPool, target: Target) -> int:
    """The canonical request's token bound, and ``target``'s upstream request built (cached)."""
    bound = request_token_bound(call.canonical())
    build_call(call, pool, target)
    return bound


async def _generate_once(request: Request, ctx: CallContext, call: ClientCall,
                         targets: list[Target]) -> Response:
    pool = ctx.gateway.upstreams
    target, data = await attempt_models(ctx, targets, lambda t: build_for_model(ctx, call, t), read_body)
    # A large answer is decoded and re-encoded off the event loop, like a large request.
    keeping = ctx.cache is not None and ctx.cache.store
    out, usage, kept = await off_loop(request, len(data),
                                      lambda: _answer(call, pool, target, data, ctx.model.id, keeping))
    keep(ctx, kept)
    response = body_response(out, then=_succeeded(ctx, usage))
    response.headers.update(fallback_headers(ctx) | cache_headers(ctx.cache))
    return response


def _answer(call: ClientCall, pool: UpstreamPool, target: Target, data: bytes, public: str,
            canonical_too: bool = False) -> tuple[bytes, Usage, ChatResponse | None]:
    """The client's answer to the upstream's ``data``, the usage to charge, and (when
    ``canonical_too``, for the response cache, or when it was decoded anyway) the canonical answer."""
    frontend = call.frontend
    if takes_fast_path(frontend, target.protocol):
        usage = frontend.fast_usage(data)
        out = frontend.fast_response(data, call, public)
        decoded: ChatResponse | None = None
        if usage is None:
            canonical = call.canonical()
            decoded = pool.adapter(target.protocol).decode_response(data, canonical)
            usage = estimate_usage(canonical, decoded)
        elif canonical_too:
            try:  # what the upstream accepted, the strict decoders may not read: then it is not kept
                decoded = pool.adapter(target.protocol).decode_response(data, call.canonical())
            except (GatewayError, ValueError, msgspec.MsgspecError):
                return out, usage, None
        if decoded is not None:
            decoded.model, decoded.usage = public, usage
        return out, usage, decoded
    canonical = call.canonical()
    decoded = pool.adapter(target.protocol).decode_response(data, canonical)
    decoded.model = public
    usage = decoded.usage
    if usage.input_tokens == 0 and usage.output_tokens == 0:
        usage = decoded.usage = estimate_usage(canonical, decoded)
    return frontend.encode_response(decoded, canonical), usage, decoded


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
        embed = await off_loop(request, len(body),
                               lambda: frontend.decode_embedding_request(body, path_model))
        ctx = _admit(request, principal, family, embed.model, False)
        targets = _targets(ctx, embed.model, "embed")
        input_estimate = sum(text_token_bound(text) for text in embed.inputs)
        if embed.token_inputs:
            input_estimate += sum(len(tokens) for tokens in embed.token_inputs)
            targets = [t for t in targets if takes_fast_path(frontend, t.protocol)]
            if not targets:
                raise InvalidRequest("Token-id `input` can only be embedded by an upstream of this API's own "
                                     f"format, and none serves `{embed.model}`; send text instead.",
                                     param="input")
        await ctx.reserve(ctx.worst_case(input_estimate, 0))
        return await _embed_once(request, ctx, frontend, embed, body, targets, input_estimate)
    except GatewayError as err:
        return _fail(request, family, ctx, err)
    except Exception:
        _crashed(ctx)
        raise


async def _embed_once(request: Request, ctx: CallContext, frontend: EmbeddingFrontend,
                      embed: EmbeddingRequest, body: bytes, targets: list[Target],
                      input_estimate: int) -> Response:
    pool = ctx.gateway.upstreams
    target, data = await attempt(ctx, targets, lambda t: build_embedding_call(frontend, embed, body, pool, t),
                                 read_body)
    # 2,048 vectors of 3,072 floats are tens of megabytes of JSON: decoded off the event loop.
    out, usage = await off_loop(request, len(data),
                                lambda: _embedding_answer(frontend, embed, pool, target, data, ctx.model.id))
    if usage is None or usage.input_tokens == 0:
        usage = Usage(input_tokens=input_estimate, estimated=True)
    # Embeddings are billed by prompt tokens only (spec section 8).
    return body_response(out, then=_succeeded(ctx, Usage(input_tokens=usage.input_tokens,
                                                         estimated=usage.estimated)))


def _embedding_answer(frontend: EmbeddingFrontend, embed: EmbeddingRequest, pool: UpstreamPool,
                      target: Target, data: bytes, public: str) -> tuple[bytes, Usage | None]:
    if takes_fast_path(frontend, target.protocol):
        return frontend.fast_embedding_response(data, embed, public)
    decoded = pool.adapter(target.protocol).decode_embedding_response(data, embed)
    decoded.model = public
    return frontend.encode_embedding_response(decoded, embed), decoded.usage
