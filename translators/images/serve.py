"""One Images call's money and relay, for both endpoints.

Order: the key was checked and the input validated (the route's part); the model is admitted (404
unknown, 403 not for this key; 400 when it is priced but not per image: no image is free by
omission); ``per_image`` times ``n`` (with the group ratio) is held before any upstream is asked
(the key's ceiling, the user's balance and a budget's period all refuse here); the call goes to the
model's ``chat``-protocol upstreams with the usual failover; the answer is relayed as it came and
the call settled on the images it holds (``len(data)``), never more than were held for. An answer
without a ``data`` list is a failed call (502, nothing charged), as is any upstream failure.

A model whose upstreams all failed is served by its ``fallbacks`` as a text call is
(``attempt_models``): a fallback the key may not use, that no ``chat`` upstream serves or that is
priced but not per image is skipped; the hold is sized again at the fallback's ``per_image``
(``ImageCall.worst_case``), the call charged at it, and the answer says ``X-Gateway-Fallback``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from gateway.api import (
    JSON_MEDIA_TYPE,
    GatewayError,
    InvalidRequest,
    UpstreamCall,
    UpstreamError,
    arrived,
    error_response,
    get_gateway,
    request_id,
)
from gateway.api.accounts import Outcome, Principal, TokenPrices, scaled_cost
from gateway.api.relay import CallContext, Target, attempt_models, fallback_headers, read_body
from translators.images.family import FAMILY, UPSTREAM_PROTOCOL
from translators.images.fields import ImageParams


class _ImagesAnswer(msgspec.Struct):
    data: list[msgspec.Raw]


_answer = msgspec.json.Decoder(_ImagesAnswer)


def image_cost(prices: TokenPrices, images: int, ratio: Fraction) -> int:
    return scaled_cost(prices.per_image, Fraction(images), ratio)


def _priced_otherwise(prices: TokenPrices) -> bool:
    return any(price for name, price in msgspec.structs.asdict(prices).items() if name != "per_image")


@dataclass(slots=True)
class ImageCall(CallContext):
    """A call's metering, its worst case ``images`` at the model's ``per_image``: the hold a
    fallback is sized again with (``gateway.relay.fallback`` asks ``worst_case``)."""

    images: int = 1

    def worst_case(self, input_tokens: int, max_tokens: int | None, candidates: int = 1) -> int:
        return image_cost(self.prices, self.images, self.ratio)


def admit(request: Request, principal: Principal, params: ImageParams) -> ImageCall:
    gw = get_gateway(request)
    model = gw.catalogue.check(principal, params.model)
    ctx = ImageCall(gateway=gw, request_id=request_id(request), principal=principal, model=model,
                    route=request.url.path, family=FAMILY, is_stream=False, started=time.perf_counter(),
                    arrived=arrived(request), images=params.n)
    if not ctx.prices.per_image and _priced_otherwise(ctx.prices):
        raise InvalidRequest(f"The model `{params.model}` has no per-image price, so "
                             f"{request.url.path} cannot serve it.", param="model")
    return ctx


def _targets(ctx: CallContext, model_id: str) -> list[Target]:
    """The ``chat`` upstreams of ``model_id``; none for a model priced but not per image (a
    fallback's too: it would serve images for free)."""
    prices = ctx.catalogue.prices(model_id)
    if not prices.per_image and _priced_otherwise(prices):
        return []
    return [t for t in ctx.gateway.upstreams.targets(model_id) if t.protocol == UPSTREAM_PROTOCOL]


def count_images(body: bytes) -> int:
    """How many images an upstream's answer holds; UpstreamError when it is no Images answer."""
    try:
        return len(_answer.decode(body).data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise UpstreamError("The upstream's answer is not an Images API response.") from None


async def relay(request: Request, principal: Principal, params: ImageParams,
                build: Callable[[Target], UpstreamCall]) -> Response:
    """Admit, hold, call, settle (see the module's docstring); the answer, or the error in the
    family's envelope."""
    gw = get_gateway(request)
    ctx: ImageCall | None = None
    try:
        ctx = admit(request, principal, params)
        await ctx.reserve(ctx.worst_case(0, None))
        targets = _targets(ctx, params.model)
        if not targets:
            raise gw.upstreams.unservable(params.model, request.url.path)
        call = ctx

        def fallback_targets(model_id: str) -> list[Target]:
            return _targets(call, model_id)

        _, body = await attempt_models(ctx, targets, build, read_body, fallback_targets)
        images = count_images(body)
        ctx.finish(200, "success", charge_nano=image_cost(ctx.prices, min(images, params.n), ctx.ratio))
        return Response(body, media_type=JSON_MEDIA_TYPE, headers=fallback_headers(ctx))
    except GatewayError as err:
        if ctx is not None:
            outcome: Outcome = "upstream_error" if err.status >= 500 else "client_error"
            ctx.finish(err.status, outcome, error_code=err.code, error_message=err.message)
        return error_response(FAMILY, err, request)
    except asyncio.CancelledError:  # the client left: nothing was delivered, nothing charged
        if ctx is not None:
            ctx.finish(499, "client_disconnect", error_code="client_disconnect")
        raise
    except Exception:
        if ctx is not None:
            ctx.finish(500, "gateway_error", error_code="internal_error")
        raise
