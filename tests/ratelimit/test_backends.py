"""The two limiter backends directly: the sliding window (in process, on a fake clock) and the
Redis script's atomicity (many concurrent checks of one key: exactly ``rpm`` pass)."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

from gateway.accounts.ratelimit import Limits, LocalBackend, RedisBackend, Verdict, rate_headers, retry_after


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_local_window_slides_by_the_second() -> None:
    clock = Clock(1_000_000.25)
    backend = LocalBackend(clock)
    limits = Limits(rpm=3)
    assert (await backend.check("k", limits)).allowed
    clock.now += 10  # 1_000_010.25
    assert (await backend.check("k", limits)).allowed
    third = await backend.check("k", limits)
    assert third.allowed and third.requests is not None and third.requests.remaining == 0
    refused = await backend.check("k", limits)
    assert not refused.allowed
    # The first call (second 1_000_000) leaves the window at 1_000_060: 49.75 s from now.
    assert abs(refused.retry_after_s - 49.75) < 1e-6
    assert retry_after(refused) == 50
    assert dict(rate_headers(refused))[b"retry-after"] == b"50"
    clock.now += 49.75
    assert (await backend.check("k", limits)).allowed
    assert not (await backend.check("k", limits)).allowed  # the two calls of second 1_000_010 remain


async def test_local_tokens_and_refusals_do_not_count() -> None:
    clock = Clock(5_000.0)
    backend = LocalBackend(clock)
    limits = Limits(rpm=100, tpm=50)
    assert (await backend.check("k", limits)).allowed
    await backend.add_tokens("k", 60)
    refused = await backend.check("k", limits)
    assert not refused.allowed and refused.tokens is not None and refused.tokens.remaining == 0
    assert refused.requests is not None and refused.requests.remaining == 99  # a refusal is not counted
    clock.now += 60
    allowed = await backend.check("k", limits)
    assert allowed.allowed and allowed.tokens is not None and allowed.tokens.remaining == 50
    assert not (await backend.check("other", Limits(rpm=0))).allowed  # keys are independent


def test_headers_of_a_served_call() -> None:
    from gateway.accounts.ratelimit import Window

    verdict = Verdict(allowed=True, requests=Window(10, 7, 59.2), tokens=Window(1000, 0, 75.0))
    headers = {k.decode(): v.decode() for k, v in rate_headers(verdict)}
    assert headers == {
        "x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "7",
        "x-ratelimit-reset-requests": "1m0s", "x-ratelimit-limit-tokens": "1000",
        "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "1m15s"}


async def test_redis_check_is_atomic_across_clients(redis_url: str) -> None:
    # Three clients stand for three replicas; 60 checks at once, rpm 10: exactly 10 pass. The deadline is
    # generous: this is about atomicity, and a busy machine's slow answer would otherwise let calls through.
    backends = [RedisBackend(redis_url, timeout_s=10.0) for _ in range(3)]
    ident = "test-" + secrets.token_hex(8)
    try:
        verdicts = await asyncio.gather(*(backends[i % 3].check(ident, Limits(rpm=10)) for i in range(60)))
        assert sum(v.allowed for v in verdicts) == 10
        refused = [v for v in verdicts if not v.allowed]
        assert all(0 < v.retry_after_s <= 60 for v in refused)
        await backends[0].add_tokens(ident, 30)
        tokens = await backends[1].check(ident, Limits(tpm=31))
        assert tokens.allowed and tokens.tokens is not None and tokens.tokens.remaining == 1
        await backends[2].add_tokens(ident, 1)
        assert not (await backends[0].check(ident, Limits(tpm=31))).allowed
    finally:
        for backend in backends:
            await backend.close()


async def test_redis_unreachable_lets_calls_through() -> None:
    backend = RedisBackend("redis://127.0.0.1:1/0")  # nothing listens on port 1
    try:
        assert (await backend.check("k", Limits(rpm=1))).allowed
        await backend.add_tokens("k", 5)  # logged, not raised
    finally:
        await backend.close()


@pytest.mark.parametrize("busy", ["before the command leaves", "while its reply comes"])
async def test_a_busy_event_loop_is_not_a_redis_outage(redis_url: str, busy: str) -> None:
    """The deadline, the command and the reply are all the event loop's to handle: a loop held
    past the deadline (here by a callback sleeping 0.4 s, as a burst of work on a loaded gateway
    would) sends the command late, or finds Redis's reply in the same turn as the expired timer.
    Redis's answer is the verdict all the same (redis-py takes a reply already read before its
    timeout); taken for an outage, ``on_redis_error: allow`` would serve every call unlimited for
    a while."""
    backend = RedisBackend(redis_url, timeout_s=0.1)
    ident = "test-" + secrets.token_hex(8)
    limits = Limits(rpm=2)
    loop = asyncio.get_running_loop()
    try:
        assert (await backend.check(ident, limits)).allowed  # connected
        for expected in (True, False, False):
            if busy == "before the command leaves":
                loop.call_soon(time.sleep, 0.4)
            else:  # one turn later: the command has been written and its reply is on the way
                loop.call_soon(loop.call_soon, time.sleep, 0.4)
            began = time.monotonic()
            verdict = await backend.check(ident, limits)
            assert time.monotonic() - began >= 0.4
            assert verdict.allowed is expected
            assert not backend.outage.down
        assert backend.decided == {"allowed": 0, "refused": 0}  # no call was left to the policy
    finally:
        await backend.close()


async def test_a_silent_redis_still_costs_only_the_deadline() -> None:
    """A Redis that accepts the connection and never answers (a listening socket nobody reads):
    the check gives up after its deadline and the policy decides."""
    async def accept_and_ignore(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    server = await asyncio.start_server(accept_and_ignore, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    backend = RedisBackend(f"redis://127.0.0.1:{port}/0", timeout_s=0.2)
    try:
        began = time.monotonic()
        assert (await backend.check("k", Limits(rpm=1))).allowed  # on_redis_error: allow
        assert 0.2 <= time.monotonic() - began < 1.0
        assert backend.outage.down and backend.decided == {"allowed": 1, "refused": 0}
    finally:
        await backend.close()
        server.close()
