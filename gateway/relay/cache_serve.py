"""The response cache in the text relay (CONTRACT 7): ask the cache about a call, answer a hit,
and hand a complete answer over to be kept (``gateway.relay.replay`` holds the seam's types).

A hit is a call like any other for the books: it is admitted by the rate limits, and its charge,
``hit_price_ratio`` of what the kept answer's usage costs at the serving model's prices now (the
fallback's when one served it, as the answer says), is held before the answer is rendered and
settled after it is sent: one ``settle`` ledger row and one request-log row of outcome
``cache_hit``. A charge of 0 holds nothing, so it writes the log row only: no money moves, and the
ledger has a row for every change of a balance (docs/money.md). No upstream is called.

A hit is rendered from the canonical answer in the caller's family, whole or as a stream, whichever
this call asked for: a stream is its events encoded by the family's own stream encoder.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from gateway.accounts.money import ratio_of, usage_cost
from gateway.accounts.ratelimit import admit_call
from gateway.edge.http import JSON_MEDIA_TYPE, body_response
from gateway.relay.call import CallContext, ClientCall
from gateway.relay.canonical import ChatRequest, ChatResponse, Usage
from gateway.relay.fallback import fallback_headers
from gateway.relay.offload import off_loop
from gateway.relay.replay import (
    CacheLookup,
    KeptAnswer,
    cache_headers,
    events_response,
    keepable,
    response_events,
)
from gateway.runtime.errors import GatewayError

_STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def look_up(request: Request, ctx: CallContext, call: ClientCall) -> CacheLookup | None:
    """The cache's verdict on ``call`` (``gateway_cache_lookup``), kept on ``ctx`` for the end of
    the call; None when no cache serves it."""
    answer = ctx.gateway.plugins.hook.gateway_cache_lookup(
        gateway=ctx.gateway, request=request, principal=ctx.principal, call=call, family=ctx.family)
    lookup: CacheLookup | None = await answer if answer is not None else None
    ctx.cache = lookup
    return lookup


async def serve_hit(request: Request, ctx: CallContext, call: ClientCall, kept: KeptAnswer,
                    lookup: CacheLookup) -> Response:
    served = ctx.catalogue.model(kept.response.model)
    if served is not None and served.id != ctx.model.id:
        ctx.asked_model, ctx.model = ctx.model.id, served  # kept from a fallback: its prices and name
    usage = kept.response.usage
    cost = usage_cost(ctx.prices, usage, ctx.ratio)
    charge = int(Fraction(cost) * ratio_of(lookup.hit_price_ratio))  # rounded down: the client's way
    if charge > 0:
        await ctx.reserve(charge)
    else:
        await admit_call(ctx.gateway, ctx.principal)  # rate limited like any call; nothing to hold
    body, media_type = await off_loop(request, len(call.body), lambda: _render(call, kept.response))
    response = body_response(body, media_type, then=lambda: ctx.finish(200, "cache_hit", usage,
                                                                        charge_nano=charge))
    response.headers.update(cache_headers(lookup) | fallback_headers(ctx))
    if call.view.stream:
        response.headers.update(_STREAM_HEADERS)
    return response


def _render(call: ClientCall, kept: ChatResponse) -> tuple[bytes, str]:
    """The kept answer in the caller's family: whole, or as the stream this call asked for."""
    request = call.canonical()
    answer = ChatResponse(id=kept.id, model=kept.model, created=kept.created,
                          candidates=kept.candidates, usage=kept.usage)
    if not call.view.stream:
        return call.frontend.encode_response(answer, request), JSON_MEDIA_TYPE
    encoder = call.frontend.stream_encoder(request, call)
    body = b"".join(encoder.encode(event) for event in response_events(answer)) + encoder.close()
    return body, encoder.content_type


def relayed_answer(ctx: CallContext, request: ChatRequest, protocol: str, relayed: list[bytes],
                   usage: Usage) -> ChatResponse | None:
    """The whole answer of a stream relayed as the upstream sent it (the fast path), decoded once
    at its end by the protocol's own decoder; None for one larger than an entry may be (not worth
    decoding) or that the decoder cannot read."""
    lookup = ctx.cache
    if lookup is None or sum(len(chunk) for chunk in relayed) > 4 * lookup.entry_bytes:
        return None
    decoder = ctx.gateway.upstreams.adapter(protocol).stream_decoder(request, ctx.config.limits)
    try:
        events = [*decoder.feed(b"".join(relayed)), *decoder.close()]
    except (GatewayError, ValueError, msgspec.MsgspecError):
        return None
    return events_response(events, usage) if decoder.complete else None


async def keep_later(scope: Scope, ctx: CallContext, nbytes: int,
                     answer: Callable[[], ChatResponse | None]) -> None:
    """A stream's complete ``answer`` kept (``keep``) after its last byte was sent: read off the
    event loop when large, as the relay decodes a large body."""
    keep(ctx, await off_loop(Request(scope), nbytes, answer))


def keep(ctx: CallContext, response: ChatResponse | None) -> None:
    """Hand a call's complete answer to the cache (``gateway_cache_store``) when the cache asked
    for it: answers that ended on an error, or larger than an entry may be, are not kept."""
    lookup = ctx.cache
    if lookup is None or not lookup.store or response is None or not keepable(response):
        return
    response.model = ctx.model.id
    ctx.gateway.plugins.hook.gateway_cache_store(gateway=ctx.gateway, lookup=lookup,
                                                 user_id=ctx.principal.user.id, response=response)
