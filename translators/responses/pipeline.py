"""``POST /v1/responses``: one call from the client's body to the stored, metered answer.

The steps are the core pipeline's (``gateway.relay.pipeline``): authenticate, decode, admit the model,
reserve the worst case, try the upstreams in routing order (``gateway.upstream.attempt``), relay
(``gateway.relay.stream.StreamRelay`` for streams), settle exactly once. What this family adds
around them, which is why it drives the steps itself instead of calling ``serve_generate``:

* the conversation of ``previous_response_id`` is rebuilt from storage first (refused with 400
  before any upstream call when it is not the caller's to continue);
* an upstream with the ``responses`` feature gets the Responses request itself (``native``);
  every other text upstream gets the canonical request of the whole conversation (``items``);
  built-in tools restrict the call to the native ones;
* with ``store`` the turn is written before the answer (or the stream's final event) is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from gateway.api import (
    Gateway,
    GatewayError,
    InvalidRequest,
    UpstreamCall,
    arrived,
    error_response,
    get_gateway,
    read_json_body,
    request_id,
)
from gateway.api.canonical import ChatRequest, Usage
from gateway.api.relay import (
    CallContext,
    Target,
    UpstreamAnswer,
    attempt_models,
    estimate_body_tokens,
    estimate_parts_tokens,
    estimate_request_tokens,
    fallback_headers,
    off_loop,
    open_relay,
    read_body,
)
from translators.responses.items import history_items, to_canonical
from translators.responses.native import FEATURE, NativeStream, native_call, native_response
from translators.responses.request import ClientRequest, decode_request
from translators.responses.response import Json, ResponseMeta, json_body, new_id, render_translated
from translators.responses.state import StoredTurn, conversation, save_turn
from translators.responses.stream import StoreBeforeEnd, TranslatedStream
from translators.responses.stream_encode import ResponsesStreamEncoder

FAMILY = "responses"


def is_native(target: Target) -> bool:
    return FEATURE in target.upstream.features


class ResponsesCall:
    """What one request needs on its way: the decoded request, the stored conversation before it,
    the canonical form (made only when a candidate upstream needs translating)."""

    def __init__(self, client: ClientRequest, history: list[Json], targets: list[Target]) -> None:
        self.client = client
        self.history = history
        self.targets = targets
        self.canonical: ChatRequest | None = None
        if not all(is_native(t) for t in targets):
            self.canonical = self.translated()
        self.input_estimate = (
            estimate_request_tokens(self.canonical)
            if self.canonical is not None
            else estimate_body_tokens(msgspec.json.encode([*history, *client.raw_items]))
        )

    def translated(self) -> ChatRequest:
        """The canonical request: made up front when a candidate is not native, else when a
        fallback model's upstream is not (``gateway.api.relay.attempt_models``)."""
        if self.canonical is None:
            self.canonical = to_canonical(self.client.request, history_items(self.history), self.client.items)
        return self.canonical

    def build(self, gw: Gateway, target: Target) -> UpstreamCall:
        if is_native(target):
            return native_call(self.client, self.history, target.upstream_model)
        return gw.upstreams.adapter(target.protocol).build_request(self.translated(), target.upstream_model)


async def create_response(request: Request) -> Response:
    gw = get_gateway(request)
    ctx: CallContext | None = None
    try:
        principal = await gw.auth.authenticate(request, FAMILY)
        body = await read_json_body(request)
        # A large body is decoded, and below translated and counted, in the body-work thread
        # (gateway.relay.offload): on the event loop it would stall every other request.
        client = await off_loop(request, len(body), lambda: decode_request(body))
        r = client.request
        history = (
            await conversation(gw.storage, principal.user.id, r.previous_response_id)
            if r.previous_response_id
            else []
        )
        model = gw.catalogue.check(principal, r.model)
        ctx = CallContext(
            gateway=gw,
            request_id=request_id(request),
            principal=principal,
            model=model,
            route=request.url.path,
            family=FAMILY,
            is_stream=r.stream,
            started=time.perf_counter(),
            arrived=arrived(request),
        )
        targets = _targets(gw, client)
        call = await off_loop(request, len(body), lambda: ResponsesCall(client, history, targets))
        await ctx.reserve(ctx.worst_case(call.input_estimate, r.max_output_tokens))
        meta = ResponseMeta(id=new_id("resp"), model=model.id, request=r)
        if r.stream:
            return await _stream(ctx, call, meta)
        return await _once(ctx, call, meta)
    except GatewayError as err:
        if ctx is not None:
            ctx.finish(
                err.status, "upstream_error" if err.status >= 500 else "client_error", error_code=err.code,
                error_message=err.message,
            )
        return error_response(FAMILY, err, request)
    except Exception:
        if ctx is not None:  # a bug: still logged, the hold released; the endpoint answers 500
            ctx.finish(500, "gateway_error", error_code="internal_error")
        raise


def _builtin_tools(client: ClientRequest) -> list[int]:
    return [i for i, t in enumerate(client.request.tools) if t.type != "function"]


def _native_only(client: ClientRequest) -> bool:
    """Built-in tools restrict the call to upstreams that speak the Responses API natively."""
    choice = client.request.tool_choice
    return bool(_builtin_tools(client)) or (choice is not None and not isinstance(choice, str)
                                            and choice.type != "function")


def _fallback_route(gw: Gateway, client: ClientRequest) -> Callable[[str], list[Target]]:
    """A fallback model's targets for this call, under the same restriction as the model's."""
    native_only = _native_only(client)

    def route(model_id: str) -> list[Target]:
        targets = gw.upstreams.targets(model_id, capability="generate")
        return [t for t in targets if is_native(t)] if native_only else targets

    return route


def _targets(gw: Gateway, client: ClientRequest) -> list[Target]:
    model = client.request.model
    targets = gw.upstreams.targets(model, capability="generate")
    if not targets:
        raise gw.upstreams.unservable(model, "/v1/responses")
    builtin = _builtin_tools(client)
    choice = client.request.tool_choice
    if _native_only(client):
        targets = [t for t in targets if is_native(t)]
        if not targets:
            where = f"tools[{builtin[0]}]" if builtin else "tool_choice"
            kind = client.request.tools[builtin[0]].type if builtin else getattr(choice, "type", "")
            raise InvalidRequest(
                f"The built-in tool `{kind}` (`{where}`) needs an upstream that speaks the "
                f"Responses API natively, and none serves `{model}`.",
                param=where,
            )
    return targets


async def _store(ctx: CallContext, call: ResponsesCall, response: Json) -> None:
    turn = StoredTurn(
        previous_response_id=call.client.request.previous_response_id,
        input=call.client.raw_items,
        response=response,
    )
    await save_turn(ctx.gateway.storage, ctx.principal.user.id, turn)


async def _once(ctx: CallContext, call: ResponsesCall, meta: ResponseMeta) -> Response:
    gw = ctx.gateway
    target, data = await attempt_models(ctx, call.targets, lambda t: call.build(gw, t), read_body,
                                        _fallback_route(gw, call.client))
    meta.model = ctx.model.id  # a fallback's, when one served
    usage: Usage | None
    if is_native(target):
        response, usage = native_response(data, meta)
        if usage is None:
            usage = Usage(
                input_tokens=call.input_estimate,
                output_tokens=estimate_body_tokens(msgspec.json.encode(response.get("output"))),
                estimated=True,
            )
    else:
        decoded = gw.upstreams.adapter(target.protocol).decode_response(data, call.translated())
        usage = decoded.usage
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            output = sum(estimate_parts_tokens(c.parts) for c in decoded.candidates)
            usage = decoded.usage = Usage(
                input_tokens=call.input_estimate, output_tokens=output, estimated=True
            )
        response = render_translated(meta, decoded)
    if call.client.request.store:
        await _store(ctx, call, response)  # durable before the client can ask for a follow-up
    ctx.finish(200, "usage_estimated" if usage.estimated else "success", usage)
    answer = json_body(response)
    answer.headers.update(fallback_headers(ctx))
    return answer


async def _stream(ctx: CallContext, call: ResponsesCall, meta: ResponseMeta) -> Response:
    gw = ctx.gateway

    def make(target: Target, _: UpstreamAnswer) -> NativeStream | TranslatedStream:
        meta.model = ctx.model.id  # a fallback's, when one serves
        if is_native(target):
            return NativeStream(meta, call.input_estimate, max_event_bytes=gw.config.limits.sse_event_bytes)
        decoder = gw.upstreams.adapter(target.protocol).stream_decoder(call.translated(), gw.config.limits)
        return TranslatedStream(decoder, ResponsesStreamEncoder(meta), call.input_estimate)

    relay, transform = await open_relay(ctx, call.targets, lambda t: call.build(gw, t), make,
                                        _fallback_route(gw, call.client))
    if not call.client.request.store:
        return relay

    async def store(final: Json) -> None:
        await _store(ctx, call, final)

    return StoreBeforeEnd(relay, transform, store)
