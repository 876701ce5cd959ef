"""Fallbacks across models (CONTRACT 7, ``models[].fallbacks``).

A generation whose model's upstreams all failed (``attempt`` gave up after its retries and
failover: 502) or refused the input as too long for the model's context (``ContextTooLong``, an
adapter's ``context_too_long``) is tried on the model's fallbacks, in order:

* a fallback the key may not use (its allowlist, its group's models) or that no upstream can serve
  for this call (``route`` gives it no target: another API, a Responses built-in tool) is skipped;
* the hold is sized again for the fallback (its prices, its output ceiling: ``CallContext.sizing``).
  A larger one is reserved before the fallback's upstream is asked and then replaces the held one,
  which is released; a key or balance that cannot cover it skips that fallback. A smaller one
  keeps the hold, which covers it;
* the call is then the fallback's: ``ctx.model`` is its entry, so the answer names it, the charge
  is at its prices and the request log names it; ``ctx.asked_model`` keeps the model asked for,
  and the answer carries ``X-Gateway-Fallback: <fallback id>`` (``fallback_headers``);
* a fallback's own fallbacks are never followed (no loops, whatever the config says);
* a stream's relay (``open_relay``) calls this before anything is sent, so its fallback is chosen
  before the first byte.

When every fallback failed too, the last failure is the answer, and the call is logged under the
model asked for.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.relay.call import CallContext
from gateway.relay.translation import ClientCall, UpstreamCall
from gateway.runtime.errors import InsufficientQuota, UpstreamError
from gateway.settings.config import ModelConfig
from gateway.upstream.attempt import ContextTooLong, Reader, T, attempt, build_call
from gateway.upstream.pool import Target

FALLBACK_HEADER = "X-Gateway-Fallback"

Route = Callable[[str], list[Target]]  # a model id -> the targets that may serve this call
_FALLS_BACK = (UpstreamError, ContextTooLong)


async def attempt_models(ctx: CallContext, targets: list[Target], build: Callable[[Target], UpstreamCall],
                         read: Reader[T], route: Route | None = None) -> tuple[Target, T]:
    """``attempt`` on ``targets`` (the model's), then on each fallback's targets as the module's
    docstring says. ``route``: the targets of a fallback for this call; by default every upstream
    of it that generates."""
    try:
        return await attempt(ctx, targets, build, read)
    except _FALLS_BACK as err:
        if not ctx.model.fallbacks or ctx.asked_model is not None:
            raise
        failure: UpstreamError | ContextTooLong = err
    asked = ctx.model
    find = route or (lambda model_id: ctx.gateway.upstreams.targets(model_id, capability="generate"))
    for fallback_id in asked.fallbacks:
        model = ctx.catalogue.model(fallback_id)
        if model is None or not ctx.catalogue.may_call(ctx.principal, fallback_id):
            continue
        fallback_targets = find(fallback_id)
        if not fallback_targets or not await _hold_for(ctx, model):
            continue
        ctx.asked_model = asked.id
        try:
            return await attempt(ctx, fallback_targets, build, read)
        except _FALLS_BACK as err:
            failure = err
    ctx.model, ctx.asked_model = asked, None  # logged under the model asked for
    raise failure


async def _hold_for(ctx: CallContext, model: ModelConfig) -> bool:
    """Make ``model`` the call's, with a hold that covers its worst case; False (nothing changed)
    when the key or the balance cannot cover it."""
    previous = ctx.model
    ctx.model = model
    need = ctx.worst_case(*ctx.sizing)
    held = ctx.reservation
    if held is None or need <= held.amount_nano:
        return True
    meter = ctx.gateway.meter
    try:
        # A hold of its own name: the held one is still open until it is released just below.
        hold = await meter.reserve(f"{ctx.request_id}~{model.id}", ctx.principal, need, from_lease=True,
                                   arrived=ctx.arrived)
    except InsufficientQuota:  # a budget's refusal too: this fallback is skipped
        ctx.model = previous
        return False
    except BaseException:  # the key disabled meanwhile, the database down: the call fails as asked
        ctx.model = previous
        raise
    ctx.reservation = hold
    meter.release(held)
    return True


def build_for_model(ctx: CallContext, call: ClientCall, target: Target) -> UpstreamCall:
    """A generation's upstream call for ``target`` (``build_call``), its answer naming the call's
    model as it is now: the fallback's once one serves."""
    call.public_model = ctx.model.id
    return build_call(call, ctx.gateway.upstreams, target)


def fallback_headers(ctx: CallContext) -> dict[str, str]:
    """The answer's headers that say a fallback served it (none otherwise)."""
    return {FALLBACK_HEADER: ctx.model.id} if ctx.asked_model is not None else {}
