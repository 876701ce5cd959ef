"""Every way a task ends, and what it costs: success (charged once), failure, timeout and a task
the upstream forgot (each failed and refunded once), a refused submission and an unreachable
upstream (nothing held, no task). The books stay clean throughout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.settings.config import Config
from tests.conftest import GatewayHandle, StartGateway
from tests.tasks.helpers import (
    PRICE_NANO,
    balance_nano,
    image_upstream,
    submit,
    wait_stored,
    wait_task,
    with_user,
)


async def _ledger_kinds(gw: GatewayHandle, request_id: str) -> list[str]:
    storage: Any = gw.gateway.storage
    rows = await storage._fetch("SELECT kind FROM ledger WHERE request_id = ? ORDER BY id", (request_id,))
    return [r["kind"] for r in rows]


async def _ends_refunded(gw: GatewayHandle, prompt: str, reason_part: str) -> dict[str, Any]:
    before = await balance_nano(gw)
    reply = await submit(gw, "imagine", {"prompt": prompt})
    assert reply.status == 200, reply.text
    task_id = reply.json()["result"]
    stored = await gw.gateway.storage.get_task(task_id)
    assert stored is not None and stored.billing_status == "reserved"
    assert (await balance_nano(gw))[0] == before[0] - PRICE_NANO  # held at submit, visible at once
    task = await wait_task(gw, task_id)
    assert task["status"] == "FAILURE" and reason_part in (task["failReason"] or ""), task
    assert task["buttons"] == [] and task["finishTime"]
    assert await balance_nano(gw) == before  # the hold came back; nothing used
    stored = await gw.gateway.storage.get_task(task_id)
    assert stored is not None and stored.billing_status == "refunded" and stored.charged_nano == 0
    assert await _ledger_kinds(gw, stored.request_id) == ["reserve", "release"]
    assert await gw.gateway.storage.audit() == []
    return task


async def test_success_charges_once(tgw: GatewayHandle) -> None:
    before, _ = await balance_nano(tgw)
    task_id = (await submit(tgw, "imagine", {"prompt": "fine"})).json()["result"]
    await wait_task(tgw, task_id)
    stored = await wait_stored(tgw, task_id, lambda t: t.billing_status == "charged")
    # Later polls and fetches change nothing.
    for _ in range(3):
        await wait_task(tgw, task_id)
    assert await _ledger_kinds(tgw, stored.request_id) == ["reserve", "settle"]
    assert (await balance_nano(tgw)) == (before - PRICE_NANO, PRICE_NANO)
    assert await tgw.gateway.storage.audit() == []


async def test_upstream_failure_is_refunded(tgw: GatewayHandle) -> None:
    await _ends_refunded(tgw, "broken sim:taskfail", "simulated failure")


async def test_forgotten_task_is_failed_and_refunded(tgw: GatewayHandle) -> None:
    await _ends_refunded(tgw, "lost sim:forget sim:dur600", "no longer knows")


async def test_timeout_fails_and_refunds(gateway_server: StartGateway,
                                         task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config(tasks={"timeout_s": 0.4})))
    await _ends_refunded(gw, "forever sim:dur60000", "timed out")


async def test_refused_submission_holds_nothing(tgw: GatewayHandle) -> None:
    before = await balance_nano(tgw)
    reply = await submit(tgw, "imagine", {"prompt": "nope sim:reject"})
    assert reply.status == 400, reply.text
    assert "banned prompt" in reply.json()["error"]["message"]
    assert await balance_nano(tgw) == before
    assert await tgw.gateway.storage.audit() == []


async def test_unreachable_upstream_is_502_and_free(gateway_server: StartGateway, simulator: Any,
                                                    task_config: Callable[..., Config]) -> None:
    gw = await with_user(await gateway_server(task_config(key="sk-sim-fail503")))
    before = await balance_nano(gw)
    reply = await submit(gw, "imagine", {"prompt": "x"})
    assert reply.status == 502 and reply.json()["error"]["code"] == "upstream_error", reply.text
    assert await balance_nano(gw) == before
    assert await gw.gateway.storage.audit() == []


async def test_failover_to_a_second_upstream(gateway_server: StartGateway, simulator: Any,
                                             task_config: Callable[..., Config]) -> None:
    upstreams = [image_upstream(simulator.base_url, "sk-sim-fail503", name="broken", priority=0),
                 image_upstream(simulator.base_url, "sk-sim-dur200", name="good", priority=1)]
    gw = await with_user(await gateway_server(task_config(upstreams=upstreams)))
    task_id = (await submit(gw, "imagine", {"prompt": "x"})).json()["result"]
    assert (await wait_task(gw, task_id))["status"] == "SUCCESS"
    stored = await gw.gateway.storage.get_task(task_id)
    assert stored is not None and stored.upstream == "good"
