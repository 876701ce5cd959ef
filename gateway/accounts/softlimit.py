"""Soft limits (spec 2.10, CONTRACT 4b, issue 13): an alert threshold on a key (its spent) or a user
(its used total), set with ``soft_limit_usd`` in the admin API. Reaching it refuses nothing; it
fires, once per crossing, the ``gateway_soft_limit_reached`` hook (a plugin sends the mail or the
webhook), a warning log line and a metric (``plugins.metrics``).

"Once per crossing" is the database's: ``Storage.claim_soft_limit_crossings`` marks a threshold
announced in the same conditional update that finds it reached, so of several replicas settling
calls of one key at once exactly one announces it. Changing the threshold arms it again.

The check runs after a charged call's settlement is written, and only for calls whose key or user
has a soft limit (noted at admission, ``note``), so other calls cost nothing here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from gateway.accounts.money import nano_to_usd
from gateway.accounts.records import Principal, RequestLog
from gateway.hooks.markers import hookimpl

if TYPE_CHECKING:
    from gateway.runtime.context import Gateway

log = logging.getLogger("gateway.accounts.softlimit")

EXTENSION = "gateway.accounts.softlimit"
_WATCH_MAX = 100_000


class SoftLimits:
    """One gateway's watch list (key id -> user id) and the checks under way."""

    def __init__(self) -> None:
        self.watched: dict[int, int] = {}
        self.pending: set[asyncio.Task[None]] = set()

    def note(self, principal: Principal) -> None:
        key, user = principal.key, principal.user
        if key.soft_limit_nano is None and user.soft_limit_nano is None:
            self.watched.pop(key.id, None)
            return
        if len(self.watched) >= _WATCH_MAX and key.id not in self.watched:
            self.watched.pop(next(iter(self.watched)))
        self.watched[key.id] = user.id

    def settled(self, gateway: Gateway, record: RequestLog) -> None:
        if record.charge_nano <= 0 or record.key_id not in self.watched:
            return
        task = asyncio.get_running_loop().create_task(check(gateway, record.user_id, record.key_id))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)


def soft_limits_of(gateway: Gateway) -> SoftLimits:
    found = gateway.extensions.get(EXTENSION)
    if isinstance(found, SoftLimits):
        return found
    made = gateway.extensions[EXTENSION] = SoftLimits()
    return made


def note(gateway: Gateway, principal: Principal) -> None:
    """Called at admission (``gateway.accounts.ratelimit.admit_call``): remember keys worth checking."""
    soft_limits_of(gateway).note(principal)


async def check(gateway: Gateway, user_id: int, key_id: int) -> None:
    """Announce the soft limits of this key and user that its settlement just reached."""
    try:
        # The settlement this call made must be in the database (spending, not balances: the quota
        # leases keep what they hold).
        await gateway.meter.flush(return_leases=False)
        crossings = await gateway.storage.claim_soft_limit_crossings(user_id, key_id)
    except Exception:
        log.warning("soft limit check of key %d failed", key_id, exc_info=True)
        return
    for crossing in crossings:
        subject = f"key {key_id}" if crossing.scope == "key" else f"user {user_id}"
        log.warning("soft limit reached: %s spent %.6f USD, soft limit %.6f USD", subject,
                    nano_to_usd(crossing.spent_nano), nano_to_usd(crossing.soft_limit_nano))
        try:
            gateway.plugins.hook.gateway_soft_limit_reached(gateway=gateway, crossing=crossing)
        except Exception:  # a subscriber's bug must not hide the alert from the others' logs
            log.exception("a gateway_soft_limit_reached subscriber failed")


@hookimpl
def gateway_request_finished(gateway: Gateway, log: RequestLog) -> None:
    found = gateway.extensions.get(EXTENSION)
    if isinstance(found, SoftLimits):
        found.settled(gateway, log)


@hookimpl
async def gateway_shutdown(gateway: Gateway) -> None:
    found = gateway.extensions.get(EXTENSION)
    if isinstance(found, SoftLimits) and found.pending:
        with contextlib.suppress(Exception):
            await asyncio.gather(*found.pending, return_exceptions=True)
